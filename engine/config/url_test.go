package config

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclet/speclet/engine/internal/logbuf"
)

// manifestServer serves whatever body and status the test sets, on 127.0.0.1.
type manifestServer struct {
	mu     sync.Mutex
	status int
	body   string
	n      int // requests served
	*httptest.Server
}

func (s *manifestServer) hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func newManifestServer(t *testing.T) *manifestServer {
	s := &manifestServer{status: 200}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n++
		w.WriteHeader(s.status)
		w.Write([]byte(s.body))
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *manifestServer) set(status int, body string) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

func TestURLFetcher(t *testing.T) {
	srv := newManifestServer(t)
	f := newURLFetcher(URLSource{URL: srv.URL + "/pods", NodeName: "n1"})
	podList := `{"apiVersion":"v1","kind":"PodList","items":[
	  {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}},
	  {"metadata":{"name":"b"},"spec":{"containers":[]}},
	  {"metadata":{"name":"c"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}]}`
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: d}\n  spec: {containers: [{name: c, image: 'busybox:1'}]}\n"
	steps := []struct {
		what    string
		status  int
		body    string
		pods    string
		changed bool
		err     string
		errs    []string
	}{
		{what: "a single pod in YAML", status: 200, body: podYAML("web", "sleep 1"), pods: "web-n1", changed: true},
		{what: "the same body: no change", status: 200, body: podYAML("web", "sleep 1"), pods: "web-n1"},
		{what: "a server error keeps the pods", status: 500, body: "boom", pods: "web-n1", err: "HTTP 500"},
		{what: "an undecodable body keeps the pods", status: 200, body: "{not json", pods: "web-n1", err: "decode"},
		{what: "a wrong kind keeps the pods", status: 200, body: "apiVersion: v1\nkind: Service\n", pods: "web-n1", err: `field kind: "Service" is not supported`},
		{what: "a PodList with an invalid item", status: 200, body: podList, pods: "a-n1,c-n1", changed: true, errs: []string{"/pods item 1: field spec.containers"}},
		{what: "a v1 List", status: 200, body: list, pods: "d-n1", changed: true},
		{what: "an empty body declares no pods", status: 200, body: "", pods: "", changed: true},
	}
	for _, s := range steps {
		srv.set(s.status, s.body)
		pods, changed, problems, err := f.fetch(context.Background())
		if got := names(pods); got != s.pods || changed != s.changed {
			t.Errorf("%s: pods %q changed %v, want %q changed %v", s.what, got, changed, s.pods, s.changed)
		}
		if (err == nil) != (s.err == "") || (err != nil && !strings.Contains(err.Error(), s.err)) {
			t.Errorf("%s: error %v, want one containing %q", s.what, err, s.err)
		}
		if len(problems) != len(s.errs) {
			t.Errorf("%s: problems %q, want %q", s.what, errText(problems), s.errs)
		}
		for i, w := range s.errs {
			if i < len(problems) && !strings.Contains(problems[i].Error(), w) {
				t.Errorf("%s: problem %q does not contain %q", s.what, problems[i], w)
			}
		}
		for _, p := range pods {
			if p.Annotations[AnnotationSource] != SourceHTTP || !IsStatic(p) {
				t.Errorf("%s: pod %s source annotation %q, want http", s.what, p.Name, p.Annotations[AnnotationSource])
			}
		}
	}
}

func TestWatchURL(t *testing.T) {
	srv := newManifestServer(t)
	srv.set(200, podYAML("web", "sleep 1"))
	m := NewMerger(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchURL(ctx, URLSource{URL: srv.URL, NodeName: "n1", Period: 100 * time.Millisecond}, m, nil)
	if u := next(t, m); u.Op != OpAdd || names(u.Pods) != "web-n1" || u.Source != SourceHTTP {
		t.Fatalf("first update %s %q from %s, want ADD web-n1 from http", u.Op, names(u.Pods), u.Source)
	}
	srv.set(200, podYAML("web", "sleep 2"))
	if u := next(t, m); u.Op != OpRemove || names(u.Pods) != "web-n1" {
		t.Fatalf("after editing the pod: %s %q, want REMOVE web-n1 (then ADD of its successor)", u.Op, names(u.Pods))
	}
	if u := next(t, m); u.Op != OpAdd || names(u.Pods) != "web-n1" {
		t.Fatalf("after editing the pod: %s %q, want ADD web-n1", u.Op, names(u.Pods))
	}
}

// A failing URL is logged once per distinct error, not on every fetch, and
// its recovery once.
func TestWatchURLReportsErrorsOnce(t *testing.T) {
	srv := newManifestServer(t)
	srv.set(500, "down")
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := NewMerger(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchURL(ctx, URLSource{URL: srv.URL, NodeName: "n1", Period: 10 * time.Millisecond}, m, log)
	for deadline := time.Now().Add(10 * time.Second); srv.hits() < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if srv.hits() < 10 {
		t.Fatalf("only %d fetches", srv.hits())
	}
	srv.set(200, podYAML("web", "sleep 1"))
	if u := next(t, m); u.Op != OpAdd || names(u.Pods) != "web-n1" {
		t.Fatalf("after the URL works: %s %q", u.Op, names(u.Pods))
	}
	cancel()
	out := logs.String()
	if n := strings.Count(out, "keeping the previous pods"); n != 1 {
		t.Errorf("the failing URL was logged %d times over %d fetches, want once:\n%s", n, srv.hits(), out)
	}
	if n := strings.Count(out, "manifest url answers again"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, out)
	}
}
