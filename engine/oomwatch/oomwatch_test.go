package oomwatch

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseRecord(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"6,6288,42266893709,-;oom-kill:constraint=CONSTRAINT_MEMCG", "prio=6 seq=6288 t=11h44m26.893709s oom-kill:constraint=CONSTRAINT_MEMCG"},
		{"3,12,5,-,caller=T1;Killed process 1 (init)\n SUBSYSTEM=memory\n", "prio=3 seq=12 t=5µs Killed process 1 (init)"},
		{"4,1,0,c;", "prio=4 seq=1 t=0s "},
		{"no prefix at all", `error: kmsg record "no prefix at all": no ';' after the prefix`},
		{"6,7;text", `error: kmsg record "6,7;text": want PRIORITY,SEQUENCE,TIMESTAMP before ';'`},
		{"x,1,2,-;text", `error: kmsg record "x,1,2,-;text": strconv.Atoi: parsing "x": invalid syntax`},
	}
	for _, tt := range tests {
		r, err := ParseRecord(tt.in)
		got := fmt.Sprintf("prio=%d seq=%d t=%s %s", r.Priority, r.Seq, r.Time, r.Message)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != tt.want {
			t.Errorf("ParseRecord(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func describe(k Kill) string {
	s := fmt.Sprintf("pid=%d process=%s cgroup=%s task-cgroup=%s constraint=%s system=%v", k.Pid, k.Process, k.Cgroup, k.TaskCgroup, k.Constraint, k.System())
	if reason, msg, ok := SystemOOM(k); ok {
		s += " event=" + reason + `:"` + msg + `"`
	}
	return s
}

func watchAll(t *testing.T, dump string) []string {
	t.Helper()
	var out []string
	if err := Watch(Lines(strings.NewReader(dump)), func(k Kill) { out = append(out, describe(k)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKernelReports feeds whole kernel OOM reports through the parser.
// testdata/memcg_oom.kmsg is a report captured from /dev/kmsg on a 6.18
// kernel with cgroup v1 (a container killed at its pod's 16 MiB limit).
// testdata/global_oom.kmsg is written in the kernel's format
// (mm/oom_kill.c: dump_header, mem_cgroup_print_oom_context's global_oom,
// __oom_kill_process): a system-wide OOM cannot be caused on purpose on a
// shared machine.
func TestKernelReports(t *testing.T) {
	tests := []struct {
		name, dump string
		want       []string
	}{
		{"a pod's memory limit (captured)", mustRead(t, "testdata/memcg_oom.kmsg"), []string{
			"pid=15614 process=sh cgroup=/kubepods/burstable/podoom-uid task-cgroup=/kubepods/burstable/podoom-uid/07937dd6ae4ba0de35ea2d2531c8023c0048885d9c5366584a3b55a5982879b5 constraint=CONSTRAINT_MEMCG system=false",
		}},
		{"the whole machine", mustRead(t, "testdata/global_oom.kmsg"), []string{
			`pid=4242 process=stress cgroup=/ task-cgroup=/user.slice/user-0.slice/session-1.scope constraint=CONSTRAINT_NONE system=true event=SystemOOM:"System OOM encountered, victim process: stress, pid: 4242"`,
		}},
		{"kernel before 5.0: legacy cgroup line, then the kill", strings.Join([]string{
			"4,1,100,-;java invoked oom-killer: gfp_mask=0x24000c0, order=0, oom_score_adj=0",
			"6,2,101,-;Task in /docker/abc killed as a result of limit of /docker",
			"3,3,102,-;Memory cgroup out of memory: Killed process 321 (java) total-vm:100kB, anon-rss:90kB, file-rss:0kB",
		}, "\n"), []string{"pid=321 process=java cgroup=/docker task-cgroup=/docker/abc constraint= system=false"}},
		{"kernel before 5.0, no cgroup named: system", strings.Join([]string{
			"4,1,100,-;stress invoked oom-killer: gfp_mask=0x24201ca, order=0, oom_score_adj=0",
			"3,2,102,-;Out of memory: Killed process 99 (stress) total-vm:100kB, anon-rss:90kB, file-rss:0kB",
		}, "\n"), []string{`pid=99 process=stress cgroup=/ task-cgroup= constraint= system=true event=SystemOOM:"System OOM encountered, victim process: stress, pid: 99"`}},
		{"two reports, noise and a bad record between", strings.Join([]string{
			"6,1,1,-;eth0: link up",
			"4,2,2,-;a invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
			"garbage without a prefix",
			"6,3,3,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/t1,task_memcg=/t1/c,task=a,pid=10,uid=0",
			"3,4,4,-;Memory cgroup out of memory: Killed process 10 (a) total-vm:1kB",
			"4,5,5,-;b invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
			"6,6,6,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=b,pid=11,uid=0",
		}, "\n"), []string{
			"pid=10 process=a cgroup=/t1 task-cgroup=/t1/c constraint=CONSTRAINT_MEMCG system=false",
			`pid=11 process=b cgroup=/ task-cgroup=/ constraint=CONSTRAINT_NONE system=true event=SystemOOM:"System OOM encountered, victim process: b, pid: 11"`,
		}},
		{"a report cut short yields nothing", "4,1,1,-;a invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0\n6,2,2,-;Mem-Info:", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := watchAll(t, tt.dump)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("kills:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestSystemOOMWithoutVictim: kubelet's message without a name or pid.
func TestSystemOOMWithoutVictim(t *testing.T) {
	_, msg, ok := SystemOOM(Kill{Cgroup: "/"})
	if !ok || msg != "System OOM encountered" {
		t.Errorf("SystemOOM = %q, %v; want \"System OOM encountered\", true", msg, ok)
	}
	if _, _, ok := SystemOOM(Kill{Cgroup: "/kubepods/pod1", Pid: 1, Process: "x"}); ok {
		t.Error("a kill at a cgroup's limit is not a system OOM")
	}
}
