package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/internal/logbuf"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/fsm"
)

// A lamp of one pod's container: off -on-> lit / light; lit -off-> off /
// fail, whose action fails.
type state uint8
type event uint8
type action uint8
type guard uint8

func (s state) String() string  { return [...]string{"off", "lit"}[s] }
func (e event) String() string  { return [...]string{"on", "off"}[e] }
func (a action) String() string { return [...]string{"light", "fail"}[a] }
func (guard) String() string    { return "none" }

var lampKind = fsm.Kind[state, event, action, guard]{
	Name:   "lamp",
	States: []state{0, 1},
	Transitions: []fsm.Transition[state, event, action, guard]{
		{From: 0, Event: 0, To: 1, Actions: []action{0}},
		{From: 1, Event: 1, To: 0, Actions: []action{1}},
	},
}

type lamp struct{ state state }

func (l *lamp) Name() string { return "lamp" }
func (l *lamp) State() state { return l.state }
func (l *lamp) Fire(ev event) (fsm.Step[state, event, action, guard], error) {
	st := fsm.Step[state, event, action, guard]{Machine: "lamp", From: l.state, Event: ev, Row: -1}
	for i, r := range lampKind.Transitions {
		if r.From == l.state && r.Event == ev {
			st.To, st.Row, st.Actions, st.Path = r.To, i, r.Actions, []state{r.To}
			l.state = r.To
			return st, nil
		}
	}
	return st, fmt.Errorf("lamp %s on %s: %w", l.state, ev, fsm.ErrNoTransition)
}
func (l *lamp) Branch(int) fsm.Branch[state, guard] { panic("no choice") }
func (l *lamp) Run(_ context.Context, a action) error {
	if a == 1 {
		return errors.New("bulb broke")
	}
	return nil
}

type owner struct {
	now   time.Time
	log   *slog.Logger
	sinks Sinks
	hist  history.Log
}

func (o *owner) Now() time.Time       { return o.now }
func (o *owner) Logger() *slog.Logger { return o.log }
func (o *owner) LogAttrs() []any      { return []any{"pod", "default/web", "container", "app"} }
func (o *owner) Sinks() *Sinks        { return &o.sinks }
func (o *owner) Record() *history.Log { return &o.hist }
func (o *owner) Instance() string     { return "app" }
func (o *owner) PodUID() types.UID    { return "uid-1" }

// TestCommon: one lamp's life as every sink sees it. Each step taken is
// counted, recorded in the owner's history with its action results, logged
// at debug level and told to Steps; a refused event is counted as rejected
// and logged below debug level only.
func TestCommon(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, func(func(string, string)) {})
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	var told []Step
	o := &owner{now: time.Unix(100, 0), log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))}
	o.sinks = Sinks{Metrics: m, Steps: func(s Step) { told = append(told, s) }}
	r := fire.NewRun(o, Common[*owner](&lampKind))
	l := &lamp{}
	ctx := context.Background()
	o.now = time.Unix(110, 0)
	fire.Fire(ctx, fsm.Machine[state, event, action, guard](l), &r, 0) // on
	fire.Fire(ctx, fsm.Machine[state, event, action, guard](l), &r, 0) // on again: refused
	o.now = time.Unix(125, 0)
	fire.Fire(ctx, fsm.Machine[state, event, action, guard](l), &r, 1) // off: fail fails

	want := []Step{
		{Machine: "lamp", Pod: "uid-1", Container: "app", From: "off", Event: "on", To: "lit", Row: 0, Actions: []string{"light"}, At: time.Unix(110, 0)},
		{Machine: "lamp", Pod: "uid-1", Container: "app", From: "lit", Event: "off", To: "off", Row: 1, Actions: []string{"fail"}, At: time.Unix(125, 0)},
	}
	if len(told) != len(want) {
		t.Fatalf("Steps told %d steps, want %d: %+v", len(told), len(want), told)
	}
	for i := range want {
		g, w := told[i], want[i]
		if g.Machine != w.Machine || g.Pod != w.Pod || g.Container != w.Container || g.From != w.From || g.Event != w.Event ||
			g.To != w.To || g.Row != w.Row || !slices.Equal(g.Actions, w.Actions) || !g.At.Equal(w.At) || len(g.Choices) != 0 {
			t.Errorf("step %d told %+v, want %+v", i, g, w)
		}
	}

	_, hist := o.hist.Snapshot(true)
	var lines []string
	for _, h := range hist {
		lines = append(lines, fmt.Sprintf("%s %s/%s %s -%s-> %s %v", h.Time.Format("05"), h.Machine, h.Instance, h.From, h.Event, h.To, h.Actions))
	}
	if got, want := strings.Join(lines, "\n"), "50 lamp/app off -on-> lit [{light }]\n05 lamp/app lit -off-> off [{fail bulb broke}]"; got != want {
		t.Errorf("history:\n%s\nwant:\n%s", got, want)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, lp := range s.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			v := s.GetCounter().GetValue()
			if h := s.GetHistogram(); h != nil {
				v = h.GetSampleSum()
			}
			if v != 0 {
				series = append(series, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(labels, ","), v))
			}
		}
	}
	for _, w := range []string{
		"speclet_transitions_total{event=on,from=off,machine=lamp,to=lit} 1",
		"speclet_transitions_total{event=off,from=lit,machine=lamp,to=off} 1",
		"speclet_rejected_events_total{event=on,machine=lamp,state=lit} 1",
		"speclet_state_duration_seconds{machine=lamp,state=lit} 15",
		"speclet_state_duration_seconds{machine=lamp,state=off} 10",
	} {
		if !slices.Contains(series, w) {
			t.Errorf("no series %s in:\n%s", w, strings.Join(series, "\n"))
		}
	}

	out := logs.String()
	for _, w := range []string{
		`level=DEBUG msg=transition pod=default/web container=app machine=lamp from=off event=on to=lit actions=[light] row=0`,
		`level=DEBUG-4 msg="event refused" pod=default/web container=app machine=lamp event=on`,
		`level=WARN msg="action failed"`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("log has no %q:\n%s", w, out)
		}
	}
}
