package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/podresources"
)

// startPodResources serves kubelet's pod-resources API on
// <root-dir>/pod-resources/kubelet.sock (kubelet has no flag for it) over
// the engine's pods, its request counters on reg, until the returned
// server is stopped (which removes the socket). devices is the
// device-plugin manager; nil: no devices.
func startPodResources(o *runOptions, eng *engine.Engine, devices podresources.Devices, reg prometheus.Registerer, log *slog.Logger) (*podresources.Server, error) {
	path := podresources.SocketPath(o.rootDir)
	srv, err := podresources.Listen(path, podresources.Config{Pods: eng, Devices: devices, Registerer: reg, Log: log})
	if err != nil {
		return nil, fmt.Errorf("pod-resources API (under --root-dir): %w", err)
	}
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error("pod-resources API stopped", "socket", path, "err", err)
		}
	}()
	log.Info("pod-resources API listening", "socket", path, "versions", "v1 v1alpha1")
	return srv, nil
}
