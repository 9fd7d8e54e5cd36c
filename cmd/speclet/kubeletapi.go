package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/server"
	"github.com/speclet/speclet/engine/servingcert"
)

// startKubeletAPI serves the authenticated kubelet API on --address:--port
// over TLS, with the read-only server's limits (server.DefaultLimits),
// until the returned server is shut down. rt is the runtime the engine
// gets (audited, metered), at endpoint. /configz shows o.configz,
// /metrics/probes probes; the stats pages are served from stats'
// housekeeping passes.
//
// The serving certificate is --tls-cert-file's, or with
// --rotate-server-certificates one the cluster issues and renews
// (engine/servingcert) until ctx ends, or a self-signed one.
func startKubeletAPI(ctx context.Context, o *runOptions, eng *engine.Engine, rt cri.Full, endpoint string, reg, probes prometheus.Gatherer, stats *kubeletapi.StatsCache, log *slog.Logger) (*server.Server, error) {
	configz, err := o.configz(endpoint)
	if err != nil {
		return nil, fmt.Errorf("kubelet API /configz: %w", err)
	}
	c := kubeletapi.Config{
		Host: eng, Runtime: rt, NodeName: o.nodeName, RootDir: o.rootDir, PodLogsDir: o.podLogsDir, SystemCgroups: o.node.systemContainers(), Anonymous: o.anonymousAuth,
		Authorizer: kubeletapi.AlwaysAllow{}, Gatherer: reg, Probes: probes, Configz: configz, Stats: stats, Log: log,
		Labels: kubeletapi.Labels{PodUID: engine.LabelPodUID, PodName: engine.LabelPodName,
			PodNamespace: engine.LabelPodNamespace, ContainerName: engine.LabelContainerName},
		Fallback: kubeletapi.Labels{PodUID: engine.KubeletLabelPodUID, PodName: engine.KubeletLabelPodName,
			PodNamespace: engine.KubeletLabelPodNamespace, ContainerName: engine.KubeletLabelContainerName},
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
	var cs kubernetes.Interface
	if o.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig: %w", err)
		}
		if cs, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("client for --kubeconfig: %w", err)
		}
		rev := &kubeletapi.APIReviewer{Client: cs}
		c.Tokens = kubeletapi.NewCachedTokens(rev, o.tokenCacheTTL, time.Now)
		authn += fmt.Sprintf(", bearer tokens (TokenReview, cached %s)", o.tokenCacheTTL)
		if o.authorizationMode == "Webhook" {
			c.Authorizer = kubeletapi.NewCachedAuthorizer(rev, o.authorizedCacheTTL, o.unauthorizedCacheTTL, time.Now)
		}
	} else {
		log.Warn("kubelet API without --kubeconfig: only client certificates and --authorization-mode=AlwaysAllow are possible; bearer tokens get 401, and every certificate --client-ca-file verifies may read logs and exec (none without --client-ca-file)")
	}
	if o.kubeconfig != "" && o.authorizationMode == "AlwaysAllow" {
		log.Warn("kubelet API with --authorization-mode=AlwaysAllow: every caller the API server authenticates, any service account's token included, may exec into, attach to and read the logs of every pod on this node; the default with --kubeconfig is Webhook")
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
	var tlsConfig *tls.Config
	var certPath string
	if o.rotateServerCertificates {
		// the node's addresses, as in its Node object: the node IP and the name
		var sans []net.IP
		if ip := net.ParseIP(eng.NodeIP()); ip != nil {
			sans = append(sans, ip)
		}
		for _, ip := range ips {
			if !slices.ContainsFunc(sans, ip.Equal) {
				sans = append(sans, ip)
			}
		}
		m, err := servingcert.New(servingcert.Config{Client: cs, NodeName: o.nodeName, DNSNames: []string{o.nodeName},
			IPs: sans, Dir: filepath.Join(o.rootDir, "pki"), Log: log})
		if err != nil {
			return nil, err
		}
		go m.Run(ctx)
		tlsConfig = api.TLSConfigFunc(m.GetCertificate)
		certPath = filepath.Join(o.rootDir, "pki", servingcert.CurrentFile) + " (CertificateSigningRequest, signer " + servingcert.SignerName + ")"
	} else {
		cert, path, err := kubeletapi.ServingCert(o.tlsCertFile, o.tlsPrivateKeyFile, filepath.Join(o.rootDir, "pki"), o.nodeName, ips, time.Now())
		if err != nil {
			return nil, err
		}
		tlsConfig, certPath = api.TLSConfig(cert), path
	}
	addr := net.JoinHostPort(o.address, strconv.Itoa(o.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--address, --port): %w", addr, err)
	}
	// The read-only server's limits; the streaming handlers (logs,
	// exec, attach, port-forward) lift their own deadlines.
	srv := server.NewTLS(l, api, tlsConfig, server.DefaultLimits)
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error("kubelet API stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("kubelet API listening", "addr", "https://"+addr, "certificate", certPath,
		"authentication", authn, "authorization", o.authorizationMode)
	return srv, nil
}
