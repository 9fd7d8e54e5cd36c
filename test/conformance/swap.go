package conformance

import (
	"fmt"
	"os"
)

// Swap kills the agent (SIGKILL: nothing of its own shutdown runs) and
// starts an agent of kind from bin on the same containerd, static pod
// directory and root directory, as an operator swapping the node agent
// does. The returned agent owns the containerd and the directory from then
// on (its Stop stops them); a only closes its CRI client.
func (a *Agent) Swap(kind AgentKind, bin string, extra ...string) (*Agent, error) {
	if err := a.Kill(); err != nil {
		return nil, err
	}
	b := &Agent{Dir: a.Dir, Manifests: a.Manifests, C: a.C, RT: a.RT}
	a.C, a.RT, a.cmd, a.Dir = nil, nil, nil, ""
	if err := b.start(kind, bin, extra...); err != nil {
		return b, err
	}
	return b, nil
}

// Kill kills the agent (SIGKILL) and waits for it to exit; its pods keep
// running. Swap after Kill starts the next agent.
func (a *Agent) Kill() error {
	if a.cmd == nil {
		return nil
	}
	if err := a.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", a.Kind, err)
	}
	<-a.exited
	a.cmd = nil
	return nil
}

// keepDir is whether Stop leaves the directory alone: an agent swapped out
// has handed it over.
func (a *Agent) keepDir() bool {
	if a.Dir == "" {
		return true
	}
	_, err := os.Stat(a.Dir)
	return err != nil
}
