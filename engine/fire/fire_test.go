package fire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/fsm"
)

// A two-state lamp: off -on-> lit / light, where light raises lit_ok; lit
// -lit_ok-> lit (internal); lit -off-> off / fail, which fails.
type state uint8
type event uint8
type action uint8
type guard uint8

const (
	off state = iota
	lit
)
const (
	on event = iota
	litOK
	turnOff
)
const (
	light action = iota
	fail
)

func (s state) String() string  { return [...]string{"off", "lit"}[s] }
func (e event) String() string  { return [...]string{"on", "lit_ok", "off"}[e] }
func (a action) String() string { return [...]string{"light", "fail"}[a] }
func (g guard) String() string  { return "none" }

type lamp struct {
	state state
	run   *Run[state, event, action, guard, *owner]
}

func (l *lamp) Name() string { return "lamp" }
func (l *lamp) State() state { return l.state }
func (l *lamp) Fire(ev event) (fsm.Step[state, event, action, guard], error) {
	st := fsm.Step[state, event, action, guard]{Machine: "lamp", From: l.state, Event: ev}
	switch {
	case l.state == off && ev == on:
		st.To, st.Actions, st.Path, st.Row = lit, []action{light}, []state{lit}, 0
	case l.state == lit && ev == litOK:
		st.To, st.Row = lit, 1
	case l.state == lit && ev == turnOff:
		st.To, st.Actions, st.Path, st.Row = off, []action{fail}, []state{off}, 2
	default:
		return st, fmt.Errorf("lamp %s on %s: %w", l.state, ev, fsm.ErrNoTransition)
	}
	l.state = st.To
	return st, nil
}
func (l *lamp) Branch(int) fsm.Branch[state, guard] { panic("the lamp has no choice") }
func (l *lamp) Run(_ context.Context, a action) error {
	if a == fail {
		return errors.New("bulb broke")
	}
	l.run.Raise(litOK)
	return nil
}

type owner struct{ now time.Time }

func (o *owner) Now() time.Time       { return o.now }
func (o *owner) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (o *owner) LogAttrs() []any      { return nil }

// TestFireTellsObserversInOrder: each step is told to Taken before its
// actions and to Ran after them with their results; an event an action
// raised is delivered after the step; a refused event goes to Refused only;
// Since moves when a state is entered, not on an internal row.
func TestFireTellsObserversInOrder(t *testing.T) {
	o := &owner{now: time.Unix(100, 0)}
	l := &lamp{}
	var log []string
	obs := []Observer[state, event, action, guard, *owner]{
		{
			Taken: func(_ context.Context, st *Step[state, event, action, guard, *owner]) {
				log = append(log, fmt.Sprintf("taken %s -%s-> %s at %d", st.From, st.Event, st.To, st.At.Unix()))
			},
			Ran: func(_ context.Context, st *Step[state, event, action, guard, *owner]) {
				log = append(log, fmt.Sprintf("ran %v", st.Results))
			},
			Refused: func(_ context.Context, st *Step[state, event, action, guard, *owner]) {
				log = append(log, fmt.Sprintf("refused %s in %s row %d: %v", st.Event, st.From, st.Row, errors.Is(st.Err, fsm.ErrNoTransition)))
			},
		},
		Taken(func(_ context.Context, st *Step[state, event, action, guard, *owner]) {
			log = append(log, "second observer")
		}),
	}
	r := NewRun(o, obs)
	l.run = &r
	var m fsm.Machine[state, event, action, guard] = l
	o.now = time.Unix(200, 0)
	Fire(context.Background(), m, &r, on)
	if got := r.Since().Unix(); got != 200 {
		t.Errorf("Since %d after entering lit at 200, want 200", got)
	}
	o.now = time.Unix(300, 0)
	Fire(context.Background(), m, &r, on)
	Fire(context.Background(), m, &r, turnOff)
	want := []string{
		"taken off -on-> lit at 200", "second observer", "ran [{light }]",
		"taken lit -lit_ok-> lit at 200", "second observer", "ran []",
		"refused on in lit row -1: true",
		"taken lit -off-> off at 300", "second observer", "ran [{fail bulb broke}]",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("observers saw\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Pending()) != 0 {
		t.Errorf("pending %v after Fire returned, want none", r.Pending())
	}
}
