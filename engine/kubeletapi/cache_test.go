package kubeletapi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// countingReviewer answers from its tables and counts the reviews asked.
type countingReviewer struct {
	calls   int
	valid   map[string]string // token -> user
	allowed map[string]bool   // user -> allowed
	fail    bool
}

func (r *countingReviewer) ReviewToken(_ context.Context, token string) (User, bool, error) {
	r.calls++
	if r.fail {
		return User{}, false, errors.New("API server unreachable")
	}
	name, ok := r.valid[token]
	return User{Name: name}, ok, nil
}

func (r *countingReviewer) Authorize(_ context.Context, a Attributes) (bool, string, error) {
	r.calls++
	if r.fail {
		return false, "", errors.New("API server unreachable")
	}
	return r.allowed[a.User.Name], "", nil
}

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock             { return &fakeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)} }
func (c *fakeClock) now() time.Time        { return c.t }
func (c *fakeClock) step(d time.Duration)  { c.t = c.t.Add(d) }
func (c *fakeClock) String() string        { return c.t.Format(time.RFC3339) }
func (r *countingReviewer) reset() (n int) { n, r.calls = r.calls, 0; return n }
func (r *countingReviewer) setFail(f bool) { r.fail = f }

// TestCachedTokens: with kubelet's 2m TTL a token reviewed once is not
// reviewed again within 2 minutes, valid or not; after them it is. An error
// is not cached. TTL 0 asks every time.
func TestCachedTokens(t *testing.T) {
	rev := &countingReviewer{valid: map[string]string{"good": "alice"}}
	clk := newFakeClock()
	c := NewCachedTokens(rev, DefaultTokenCacheTTL, clk.now)
	ctx := context.Background()
	steps := []struct {
		what      string
		step      time.Duration
		token     string
		fail      bool
		wantUser  string
		wantOK    bool
		wantErr   bool
		wantCalls int // reviews asked by this step
	}{
		{"first request reviews", 0, "good", false, "alice", true, false, 1},
		{"again at once: cached", 0, "good", false, "alice", true, false, 0},
		{"1m59s later: cached", time.Minute + 59*time.Second, "good", false, "alice", true, false, 0},
		{"2m after the review: asked again", time.Second, "good", false, "alice", true, false, 1},
		{"an invalid token reviews", 0, "bad", false, "", false, false, 1},
		{"the invalid token again: cached", time.Minute, "bad", false, "", false, false, 0},
		{"an error", 0, "other", true, "", false, true, 1},
		{"the error is not cached", 0, "other", true, "", false, true, 1},
	}
	for _, s := range steps {
		clk.step(s.step)
		rev.setFail(s.fail)
		u, ok, err := c.ReviewToken(ctx, s.token)
		if calls := rev.reset(); calls != s.wantCalls || u.Name != s.wantUser || ok != s.wantOK || (err != nil) != s.wantErr {
			t.Errorf("%s (at %s): user %q ok %v err %v, %d reviews; want %q %v err %v, %d reviews",
				s.what, clk, u.Name, ok, err, calls, s.wantUser, s.wantOK, s.wantErr, s.wantCalls)
		}
	}
	none := NewCachedTokens(rev, 0, clk.now)
	none.ReviewToken(ctx, "good")
	none.ReviewToken(ctx, "good")
	if calls := rev.reset(); calls != 2 {
		t.Errorf("TTL 0: %d reviews for two requests, want 2", calls)
	}
}

// TestCachedAuthorizer: kubelet's defaults keep an allowed decision 5m and
// a refusal 30s; another user, verb or subresource is another decision;
// the path is not part of it; errors are not cached.
func TestCachedAuthorizer(t *testing.T) {
	rev := &countingReviewer{allowed: map[string]bool{"alice": true}}
	clk := newFakeClock()
	c := NewCachedAuthorizer(rev, DefaultAuthorizedCacheTTL, DefaultUnauthorizedCacheTTL, clk.now)
	ctx := context.Background()
	at := func(user, verb, sub, path string) Attributes {
		return Attributes{User: User{Name: user, Groups: []string{"g"}}, Verb: verb, Node: "node-a", Subresource: sub, Path: path}
	}
	steps := []struct {
		what      string
		step      time.Duration
		a         Attributes
		fail      bool
		wantOK    bool
		wantErr   bool
		wantCalls int
	}{
		{"alice reviewed", 0, at("alice", "get", "proxy", "/pods"), false, true, false, 1},
		{"alice, another path: cached", 0, at("alice", "get", "proxy", "/containerLogs/a/b/c"), false, true, false, 0},
		{"alice, another verb: reviewed", 0, at("alice", "create", "proxy", "/exec/a/b/c"), false, true, false, 1},
		{"alice, stats: reviewed", 0, at("alice", "get", "stats", "/stats/summary"), false, true, false, 1},
		{"4m59s later: cached", 4*time.Minute + 59*time.Second, at("alice", "get", "proxy", "/pods"), false, true, false, 0},
		{"5m later: reviewed", time.Second, at("alice", "get", "proxy", "/pods"), false, true, false, 1},
		{"bob refused, reviewed", 0, at("bob", "get", "proxy", "/pods"), false, false, false, 1},
		{"bob 29s later: cached refusal", 29 * time.Second, at("bob", "get", "proxy", "/pods"), false, false, false, 0},
		{"bob 30s later: reviewed", time.Second, at("bob", "get", "proxy", "/pods"), false, false, false, 1},
		{"carol, an error", 0, at("carol", "get", "proxy", "/pods"), true, false, true, 1},
		{"carol, not cached", 0, at("carol", "get", "proxy", "/pods"), true, false, true, 1},
	}
	for _, s := range steps {
		clk.step(s.step)
		rev.setFail(s.fail)
		ok, _, err := c.Authorize(ctx, s.a)
		if calls := rev.reset(); calls != s.wantCalls || ok != s.wantOK || (err != nil) != s.wantErr {
			t.Errorf("%s: allowed %v err %v, %d reviews; want %v err %v, %d reviews", s.what, ok, err, calls, s.wantOK, s.wantErr, s.wantCalls)
		}
	}
}
