package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/kubeletapi"
)

// startKubeletAPI serves the authenticated kubelet API on --address:--port
// over TLS until the returned server is shut down.
func startKubeletAPI(o *runOptions, eng *engine.Engine, client *cri.Client, reg prometheus.Gatherer, log *slog.Logger) (*http.Server, error) {
	c := kubeletapi.Config{
		Host: eng, Runtime: client, NodeName: o.nodeName, RootDir: o.rootDir, Anonymous: o.anonymousAuth,
		Authorizer: kubeletapi.AlwaysAllow{}, Gatherer: reg, Log: log,
		Labels: kubeletapi.Labels{PodUID: engine.LabelPodUID, PodName: engine.LabelPodName,
			PodNamespace: engine.LabelPodNamespace, ContainerName: engine.LabelContainerName},
	}
	if o.clientCAFile != "" {
		pool, err := kubeletapi.LoadClientCAs(o.clientCAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = pool
	}
	authn := "client certificates"
	if o.clientCAFile == "" {
		authn = "no client certificates (no --client-ca-file)"
	}
	if o.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig: %w", err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("client for --kubeconfig: %w", err)
		}
		rev := &kubeletapi.APIReviewer{Client: cs}
		c.Tokens = rev
		authn += ", bearer tokens (TokenReview)"
		if o.authorizationMode == "Webhook" {
			c.Authorizer = rev
		}
	} else {
		log.Warn("kubelet API without --kubeconfig: only client certificates and --authorization-mode=AlwaysAllow are possible; bearer tokens get 401")
	}
	if o.anonymousAuth {
		authn += ", anonymous"
	}
	api, err := kubeletapi.New(c)
	if err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, s := range []string{o.address, o.nodeIP} {
		if ip := net.ParseIP(s); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
	}
	cert, certPath, err := kubeletapi.ServingCert(o.tlsCertFile, o.tlsPrivateKeyFile, filepath.Join(o.rootDir, "pki"), o.nodeName, ips, time.Now())
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(o.address, strconv.Itoa(o.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--address, --port): %w", addr, err)
	}
	// No read or write timeout: logs are followed and exec sessions last.
	srv := &http.Server{Handler: api, TLSConfig: api.TLSConfig(cert), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	go func() {
		if err := srv.Serve(tls.NewListener(l, srv.TLSConfig)); err != nil && err != http.ErrServerClosed {
			log.Error("kubelet API stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("kubelet API listening", "addr", "https://"+addr, "certificate", certPath,
		"authentication", authn, "authorization", o.authorizationMode)
	return srv, nil
}
