package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/speclet/speclet/engine/podresources"
)

// checkPodResources asks the daemon's pod-resources socket under root for
// List and for Get of namespace/name: both must name the pod with its
// containers.
func checkPodResources(t *testing.T, root, namespace, name string, containers ...string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+podresources.SocketPath(root), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := podresourcesv1.NewPodResourcesListerClient(conn)
	names := func(p *podresourcesv1.PodResources) string {
		var s []string
		for _, c := range p.GetContainers() {
			s = append(s, c.GetName())
		}
		return strings.Join(s, ",")
	}
	list, err := cli.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("pod-resources List: %v", err)
	}
	found := false
	for _, p := range list.GetPodResources() {
		if p.GetNamespace() == namespace && p.GetName() == name {
			found = names(p) == strings.Join(containers, ",")
		}
	}
	if !found {
		t.Errorf("pod-resources List = %v, want %s/%s with containers %v", list, namespace, name, containers)
	}
	got, err := cli.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
	if err != nil || names(got.GetPodResources()) != strings.Join(containers, ",") {
		t.Errorf("pod-resources Get %s/%s = %v, %v; want containers %v", namespace, name, got, err, containers)
	}
}

// A socket that cannot be made stops the start with an error naming it.
func TestRunDaemonPodResourcesSocket(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, podresources.DirName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", "0",
		"--healthz-port", "0", "--port", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = runDaemon(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "pod-resources") || !strings.Contains(err.Error(), filepath.Join(root, podresources.DirName)) {
		t.Errorf("runDaemon with a file where %s goes = %v, want an error naming the pod-resources socket's directory", podresources.DirName, err)
	}
}
