package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadOnlyProfiling: the read-only server serves /debug/pprof/ only
// with --enable-profiling.
func TestReadOnlyProfiling(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusNotFound},
		{[]string{"--enable-profiling"}, http.StatusOK},
	} {
		o, err := parseRunFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(readOnlyMux(o, nil, prometheus.NewRegistry(), nil))
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline"} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%v: GET %s = %d, want %d", tc.args, path, resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusOK && path == "/debug/pprof/heap?debug=1" && !strings.Contains(string(body), "heap profile") {
				t.Errorf("%v: GET %s: no heap profile in %.200q", tc.args, path, body)
			}
		}
		srv.Close()
	}
}
