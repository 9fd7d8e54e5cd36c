package verify

import (
	"strings"
	"testing"

	"github.com/speclet/speclet/spec"
)

// TestTiesGuard: what the shipped ties say of restart_allowed for a
// regular container, per restart policy and exit; an untied guard is free;
// a tie that reads a value not given, or a name that does not exist, is an
// error naming it.
func TestTiesGuard(t *testing.T) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ties, err := NewTies(s)
	if err != nil {
		t.Fatal(err)
	}
	v := Valuation{Single: map[string]string{"pod": "synced", "sandbox": "ready", "probe": "off", "node": "idle"},
		Roles: []string{"regular"}, Instances: []string{"deciding"}}
	for _, tc := range []struct {
		policy string
		failed bool
		want   Answer
	}{
		{"always", false, AnswerTrue},
		{"on_failure", false, AnswerFalse},
		{"on_failure", true, AnswerTrue},
		{"never", true, AnswerFalse},
	} {
		got, err := ties.Guard("container", "restart_allowed", v, 0, map[string]string{"restart_policy": tc.policy}, map[string]bool{"exit_failed": tc.failed})
		if err != nil || got != tc.want {
			t.Errorf("restart_allowed under %s, exit_failed=%v = %v, %v; want %v", tc.policy, tc.failed, got, err, tc.want)
		}
	}
	if got, err := ties.Guard("container", "spec_changed", v, 0, nil, nil); err != nil || got != AnswerFree {
		t.Errorf("untied spec_changed = %v, %v; want free", got, err)
	}
	for _, tc := range []struct {
		machine, guard string
		params         map[string]string
		want           string
	}{
		{"container", "restart_allowed", nil, "read a parameter or flag not given"},
		{"container", "restart_allowed", map[string]string{"restart_policy": "sometimes"}, `no value "sometimes"`},
		{"container", "nope", nil, `no guard "nope"`},
		{"nope", "x", nil, `no machine "nope"`},
	} {
		if _, err := ties.Guard(tc.machine, tc.guard, v, 0, tc.params, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Guard(%s, %s, %v) error %v, want one containing %q", tc.machine, tc.guard, tc.params, err, tc.want)
		}
	}
	if g := ties.Guards("sandbox"); len(g) != 1 || g[0] != "recreate_forbidden" {
		t.Errorf("tied guards of sandbox = %v, want [recreate_forbidden]", g)
	}
}
