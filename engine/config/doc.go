// Package config owns speclet's pod sources and the merge of their snapshots
// into one stream of PodUpdate operations for the engine.
//
// A source (a manifest directory, a manifest URL) produces complete snapshots:
// every pod it currently declares. The Merger compares each snapshot with the
// previous one of the same source and sends ADD, UPDATE, REMOVE and RECONCILE
// operations on one channel, as kubelet's PodConfig does in incremental mode.
//
// Usage:
//
//	m := config.NewMerger(log)
//	go config.WatchDir(ctx, config.DirSource{Dir: "/etc/speclet/pods", NodeName: node}, m, log)
//	go config.WatchURL(ctx, config.URLSource{URL: url, NodeName: node}, m, log)
//	engine.Run(ctx, m.Updates())
//
// Static pods are named "<name>-<node-name>", live in namespace "default"
// unless they say otherwise, and get a UID that hashes their manifest, the
// node name and where the manifest came from: editing a manifest replaces the
// pod with a new one.
package config
