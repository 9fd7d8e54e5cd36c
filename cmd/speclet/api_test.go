package main

import (
	"context"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRuntimeClassCreatedJustBefore: a RuntimeClass the informer's watch
// has not delivered yet (created a moment before the pod that names it) is
// found with a GET, not refused as RuntimeClassNotFound; one that does not
// exist still is.
func TestRuntimeClassCreatedJustBefore(t *testing.T) {
	cs := fake.NewSimpleClientset()
	// The watch delivers nothing: the lister keeps what the first list saw.
	cs.PrependWatchReactor("runtimeclasses", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lookup := runtimeClassLookup(ctx, cs)
	// Wait for the informer's first list (a wait bounded for a failing test).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		listed := false
		for _, a := range cs.Actions() {
			listed = listed || a.GetVerb() == "list" && a.GetResource().Resource == "runtimeclasses"
		}
		if listed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never listed runtimeclasses")
		}
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := lookup("plain"); err != nil || h != "runc" {
		t.Errorf(`lookup("plain") = %q, %v; want "runc"`, h, err)
	}
	if _, err := lookup("missing"); !apierrors.IsNotFound(err) {
		t.Errorf(`lookup("missing"): %v, want NotFound`, err)
	}
}
