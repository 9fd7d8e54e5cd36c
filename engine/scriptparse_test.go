package engine

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
)

// parsePod builds a pod from a script: args on the command line, one
// container per body line:
//
//	add pod=NAME [uid=UID] [restart=Always|OnFailure|Never] [grace=S] [static=false] [network=pod]
//	    [deadline=S (activeDeadlineSeconds)] [node=NODE] [selector=(K:V,...)] [runtime-class=NAME] [gates=(TYPE,...)]
//	container NAME [cpu=Q] [memory=Q] [hostports=PORT[/PROTO],...] [image=REF] [pull=Always|IfNotPresent|Never] [exit=DUR code=N] [term=dies|handle|ignore] [starterr=MSG]
//	          [poststart=HOOK[:CODE[:DELAY]]] [prestop=HOOK[:CODE[:DELAY]]]
//	init NAME ...
//	sidecar NAME ...
func (h *scriptHarness) parsePod(d *datadriven.TestData) *v1.Pod {
	var name, uid, restart string
	grace := int64(30)
	static, hostNetwork := true, true
	for _, a := range d.CmdArgs {
		v := firstVal(a)
		switch a.Key {
		case "pod":
			name = v
		case "uid":
			uid = v
		case "restart":
			restart = v
		case "grace":
			g, _ := strconv.ParseInt(v, 10, 64)
			grace = g
		case "static":
			static = v != "false"
		case "network":
			hostNetwork = v != "pod"
		case "deletion-grace", "node", "selector", "runtime-class", "gates", "deadline":
		default:
			h.t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
		}
	}
	if uid == "" {
		uid = name
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid), Annotations: map[string]string{}},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicy(restart), TerminationGracePeriodSeconds: &grace, HostNetwork: hostNetwork},
	}
	if restart == "" {
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if static {
		pod.Annotations[config.AnnotationSource] = config.SourceFile
	} else {
		pod.Annotations[config.AnnotationSource] = config.SourceAPI
	}
	for _, a := range d.CmdArgs {
		v := firstVal(a)
		switch a.Key {
		case "node":
			pod.Spec.NodeName = v
		case "selector":
			// K:V,...: spec.nodeSelector.
			pod.Spec.NodeSelector = map[string]string{}
			for _, kv := range a.Vals {
				k, val, _ := strings.Cut(kv, ":")
				pod.Spec.NodeSelector[k] = val
			}
		case "runtime-class":
			pod.Spec.RuntimeClassName = &v
		case "deadline":
			ads, _ := strconv.ParseInt(v, 10, 64)
			pod.Spec.ActiveDeadlineSeconds = &ads
		case "gates":
			for _, g := range a.Vals {
				pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, v1.PodReadinessGate{ConditionType: v1.PodConditionType(g)})
			}
		}
	}
	if d.HasArg("deletion-grace") {
		var g int64
		d.ScanArgs(h.t, "deletion-grace", &g)
		pod.DeletionGracePeriodSeconds = &g
	}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		c := v1.Container{Name: f[1], Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}
		b := sim.Behavior{}
		var exit *sim.Exit
		var target string // an ephemeral container's targetContainerName
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "target":
				target = v
			case "image":
				c.Image = v
			case "pull":
				c.ImagePullPolicy = v1.PullPolicy(v)
			case "exit":
				dur, err := time.ParseDuration(v)
				if err != nil {
					h.t.Fatalf("%s: %v", d.Pos, err)
				}
				if exit == nil {
					exit = &sim.Exit{}
				}
				exit.After = dur
			case "code":
				n, _ := strconv.Atoi(v)
				if exit == nil {
					exit = &sim.Exit{}
				}
				exit.Code = int32(n)
			case "term":
				b.Term = map[string]sim.Term{"dies": sim.TermDies, "handle": sim.TermHandled, "ignore": sim.TermIgnored}[v]
			case "starterr":
				b.StartError = v
			case "poststart", "prestop":
				// NAME[:CODE[:DELAY]]: an exec hook running NAME, which the
				// runtime answers with exit code CODE after DELAY.
				hook, reply := execHook(h.t, d, v)
				if c.Lifecycle == nil {
					c.Lifecycle = &v1.Lifecycle{}
				}
				if k == "poststart" {
					c.Lifecycle.PostStart = hook
				} else {
					c.Lifecycle.PreStop = hook
				}
				b.Exec = append(b.Exec, reply)
			case "reply":
				// CMD[:CODE[:DELAY]]: how the runtime answers an exec of CMD.
				_, reply := execHook(h.t, d, v)
				b.Exec = append(b.Exec, reply)
			case "liveness", "readiness", "startup":
				p := parseProbe(h.t, d, v)
				switch k {
				case "liveness":
					c.LivenessProbe = p
				case "readiness":
					c.ReadinessProbe = p
				default:
					c.StartupProbe = p
				}
			case "cpu", "memory":
				// Requests (limits are not needed for admission).
				if c.Resources.Requests == nil {
					c.Resources.Requests = v1.ResourceList{}
				}
				c.Resources.Requests[v1.ResourceName(k)] = resource.MustParse(v)
			case "hostports":
				// PORT[/PROTOCOL],...: host ports (container port = host port).
				for _, pp := range strings.Split(v, ",") {
					port, proto, _ := strings.Cut(pp, "/")
					pn, _ := strconv.Atoi(port)
					c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: int32(pn), HostPort: int32(pn), Protocol: v1.Protocol(proto)})
				}
			case "ports":
				// NAME:PORT,...
				for _, np := range strings.Split(v, ",") {
					n, port, _ := strings.Cut(np, ":")
					pn, _ := strconv.Atoi(port)
					c.Ports = append(c.Ports, v1.ContainerPort{Name: n, ContainerPort: int32(pn)})
				}
			default:
				h.t.Fatalf("%s: unknown container field %q", d.Pos, k)
			}
		}
		b.Exit = exit
		h.srv.Runtime.OnContainer(sim.Match{Pod: name, Name: c.Name}, b)
		switch f[0] {
		case "container":
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		case "init":
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "sidecar":
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "ephemeral":
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
				v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon(c), TargetContainerName: target})
		default:
			h.t.Fatalf("%s: unknown line %q", d.Pos, line)
		}
	}
	return pod
}

// parseProbe parses HANDLER[,period=S][,failure=N][,success=N][,delay=S][,timeout=S][,grace=S]
// where HANDLER is exec:CMD, http:PORT[:PATH], tcp:PORT or grpc:PORT (hosts
// are 127.0.0.1; PORT is a number or a port name).
func parseProbe(t *testing.T, d *datadriven.TestData, v string) *v1.Probe {
	f := strings.Split(v, ",")
	p := &v1.Probe{}
	h := strings.SplitN(f[0], ":", 3)
	port := func() intstr.IntOrString {
		if len(h) < 2 {
			t.Fatalf("%s: probe %q: no port", d.Pos, v)
		}
		return intstr.Parse(h[1])
	}
	switch h[0] {
	case "exec":
		p.Exec = &v1.ExecAction{Command: []string{h[1]}}
	case "http":
		p.HTTPGet = &v1.HTTPGetAction{Host: "127.0.0.1", Port: port()}
		if len(h) > 2 {
			p.HTTPGet.Path = h[2]
		}
	case "tcp":
		p.TCPSocket = &v1.TCPSocketAction{Host: "127.0.0.1", Port: port()}
	case "grpc":
		p.GRPC = &v1.GRPCAction{Port: port().IntVal}
	default:
		t.Fatalf("%s: probe %q: unknown handler", d.Pos, v)
	}
	for _, kv := range f[1:] {
		k, s, _ := strings.Cut(kv, "=")
		n64, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			t.Fatalf("%s: probe %q: %v", d.Pos, v, err)
		}
		n := int32(n64)
		switch k {
		case "period":
			p.PeriodSeconds = n
		case "failure":
			p.FailureThreshold = n
		case "success":
			p.SuccessThreshold = n
		case "delay":
			p.InitialDelaySeconds = n
		case "timeout":
			p.TimeoutSeconds = n
		case "grace":
			p.TerminationGracePeriodSeconds = &n64
		default:
			t.Fatalf("%s: probe %q: unknown field %q", d.Pos, v, k)
		}
	}
	return p
}

// execHook parses NAME[:CODE[:DELAY]] into an exec hook running NAME and
// the simulated runtime's reply to it.
func execHook(t *testing.T, d *datadriven.TestData, v string) (*v1.LifecycleHandler, sim.ExecReply) {
	f := strings.Split(v, ":")
	reply := sim.ExecReply{Command: f[0]}
	if len(f) > 1 {
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("%s: hook %q: %v", d.Pos, v, err)
		}
		reply.ExitCode = int32(n)
		if reply.ExitCode != 0 {
			reply.Stderr = f[0] + " failed"
		}
	}
	if len(f) > 2 {
		dur, err := time.ParseDuration(f[2])
		if err != nil {
			t.Fatalf("%s: hook %q: %v", d.Pos, v, err)
		}
		reply.Delay = dur
	}
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{f[0]}}}, reply
}

// firstVal is the first value of a script argument ("" when it has none).
func firstVal(a datadriven.CmdArg) string {
	if len(a.Vals) == 0 {
		return ""
	}
	return a.Vals[0]
}
