package engine

import (
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/userns"
)

// This file holds the engine's side of user namespaces (engine/userns): the
// ranges of hostUsers: false pods are read back from their records when
// the engine is made (kubelet's MakeUserNsManager), handed out against
// what the runtime last said it supports, and released when the pod's
// directories go (the purge of a finished pod, the sweep of a pod that
// is gone), so a range is held while anything of the pod may still run.
// kubelet releases it when the pod has terminated; a terminated pod's
// UID never runs again under either agent, so only when the range is
// free again differs.

// newUserNamespaces makes the engine's user namespace manager over the
// pods under RootDir.
func (e *Engine) newUserNamespaces() error {
	c := e.cfg.UserNamespaces
	c.PodsDir, c.MaxPods = filepath.Join(e.cfg.RootDir, "pods"), e.cfg.MaxPods
	m, err := userns.New(c)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.userns = m
	return nil
}

// userNamespace is the user namespace option of pod on runtime handler
// handler (worker.Host.UserNamespace).
func (e *Engine) userNamespace(pod *v1.Pod, handler string) (*runtimeapi.UserNamespace, error) {
	return e.userns.Namespace(pod, handler, e.features.Load())
}

// releaseUserNamespace frees the range of pod uid, whose directories went.
func (e *Engine) releaseUserNamespace(uid types.UID) { e.userns.Release(uid) }
