package cri

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A CRI list reply is one gRPC message of at most MaxMsgSize (16 MiB):
// kubelet's client (pkg/kubelet/cri/remote maxMsgSize) and containerd's
// server (defaults.DefaultMaxSendMsgSize, [grpc] max_send_message_size)
// both stop there, and the CRI has no pagination. Raising the limit on
// speclet's side alone would not help: containerd refuses to send the
// reply. ListContainers, ListContainerStats and ListPodSandboxStats of
// --max-pods 250 pods of 24 containers each with long names and images
// need about 20 MiB, so the client splits them by sandbox:
//
//   - a list call without a container id or sandbox id in its filter is
//     made whole first; when it fails with ResourceExhausted (the reply is
//     over the limit on either end), the client lists the sandboxes and
//     makes the call once per sandbox with the same filter and that
//     sandbox's id, and returns the union;
//   - a call without a label selector then stays split (no doomed whole
//     call each relist) until a split pass of a call without any filter
//     totals less than half of MaxMsgSize; a call with a label selector
//     (usually a pod's few records) is always tried whole first.
//
// Each split reply holds one sandbox's records, bounded by the manifest
// limits (engine.MaxContainerRecordBytes and config.MaxContainers; `speclet
// run` checks the bound for its --maximum-dead-containers-per-container),
// and the sandbox list itself by --max-pods (engine.MaxSandboxRecordBytes).
// A container whose sandbox is gone from the runtime is not listed while
// split (containerd removes a sandbox's containers with it); a sandbox
// created during a split pass may be missed until the next call.
type splitter struct {
	containers, containerStats, sandboxStats atomic.Bool
}

// tooLarge reports whether a gRPC error says a message was over the limit.
func tooLarge(err error) bool { return status.Code(err) == codes.ResourceExhausted }

// splitMode says how a list call uses and sets its splitter flag.
type splitMode int

const (
	// splitOnce: a call with a label selector, tried whole every time.
	splitOnce splitMode = iota
	// splitFollow: a call filtered by state: split while the flag is set.
	splitFollow
	// splitSticky: a call without a filter: sets the flag when its whole
	// reply is too large and clears it when a split pass is small.
	splitSticky
)

// splitList makes a list call whole or, when the whole reply is too large
// or (mode splitFollow, splitSticky) split is set, once per sandbox. part
// returns the items and the reply's size in bytes.
func splitList[T any](ctx context.Context, c *Client, split *atomic.Bool, mode splitMode, whole func() ([]T, error), part func(sandboxID string) ([]T, int, error)) ([]T, error) {
	if mode == splitOnce || !split.Load() {
		items, err := whole()
		if err == nil || !tooLarge(err) {
			return items, err
		}
		if mode != splitOnce {
			split.Store(true)
		}
	}
	sbs, err := c.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []T
	total := 0
	for _, sb := range sbs {
		items, n, err := part(sb.Id)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		total += n
	}
	if mode == splitSticky && total < MaxMsgSize/2 {
		split.Store(false)
	}
	return out, nil
}

// replySize is the encoded size of a list reply when sized (a split pass
// sums it to decide whether to stay split), else 0: a whole call, every
// relist, does not walk the reply it already decoded to size it again.
func replySize(r proto.Message, sized bool) int {
	if !sized {
		return 0
	}
	return proto.Size(r)
}

func modeOf(labels map[string]string, state bool) splitMode {
	switch {
	case len(labels) > 0:
		return splitOnce
	case state:
		return splitFollow
	}
	return splitSticky
}

// ListContainers lists the containers that match filter (nil: all), split
// by sandbox when the whole list is over the message limit (see splitter).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	list := func(f *runtimeapi.ContainerFilter, sized bool) ([]*runtimeapi.Container, int, error) {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			return nil, 0, err
		}
		return r.Containers, replySize(r, sized), nil
	}
	if filter.GetId() != "" || filter.GetPodSandboxId() != "" {
		cs, _, err := list(filter, false)
		return cs, c.err("ListContainers", "", err)
	}
	cs, err := splitList(ctx, c, &c.split.containers, modeOf(filter.GetLabelSelector(), filter.GetState() != nil),
		func() ([]*runtimeapi.Container, error) { cs, _, err := list(filter, false); return cs, err },
		func(id string) ([]*runtimeapi.Container, int, error) {
			f := &runtimeapi.ContainerFilter{PodSandboxId: id}
			if filter != nil {
				f = proto.CloneOf(filter)
				f.PodSandboxId = id
			}
			return list(f, true)
		})
	if err != nil {
		return nil, c.err("ListContainers", "", err)
	}
	return cs, nil
}

// ListContainerStats returns the statistics of the containers that match
// filter (nil: all), split by sandbox when the whole list is over the
// message limit (see splitter).
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	list := func(f *runtimeapi.ContainerStatsFilter, sized bool) ([]*runtimeapi.ContainerStats, int, error) {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: f})
		if err != nil {
			return nil, 0, err
		}
		return r.GetStats(), replySize(r, sized), nil
	}
	if filter.GetId() != "" || filter.GetPodSandboxId() != "" {
		st, _, err := list(filter, false)
		return st, c.err("ListContainerStats", "", err)
	}
	st, err := splitList(ctx, c, &c.split.containerStats, modeOf(filter.GetLabelSelector(), false),
		func() ([]*runtimeapi.ContainerStats, error) { st, _, err := list(filter, false); return st, err },
		func(id string) ([]*runtimeapi.ContainerStats, int, error) {
			f := &runtimeapi.ContainerStatsFilter{PodSandboxId: id}
			if filter != nil {
				f = proto.CloneOf(filter)
				f.PodSandboxId = id
			}
			return list(f, true)
		})
	if err != nil {
		return nil, c.err("ListContainerStats", "", err)
	}
	return st, nil
}

// ListPodSandboxStats returns the statistics of the sandboxes that match
// filter (nil: all), split by sandbox when the whole list is over the
// message limit (see splitter).
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	list := func(f *runtimeapi.PodSandboxStatsFilter, sized bool) ([]*runtimeapi.PodSandboxStats, int, error) {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: f})
		if err != nil {
			return nil, 0, err
		}
		return r.GetStats(), replySize(r, sized), nil
	}
	if filter.GetId() != "" {
		st, _, err := list(filter, false)
		return st, c.err("ListPodSandboxStats", "", err)
	}
	st, err := splitList(ctx, c, &c.split.sandboxStats, modeOf(filter.GetLabelSelector(), false),
		func() ([]*runtimeapi.PodSandboxStats, error) { st, _, err := list(filter, false); return st, err },
		func(id string) ([]*runtimeapi.PodSandboxStats, int, error) {
			f := &runtimeapi.PodSandboxStatsFilter{Id: id}
			if filter != nil {
				f = proto.CloneOf(filter)
				f.Id = id
			}
			return list(f, true)
		})
	if err != nil {
		return nil, c.err("ListPodSandboxStats", "", err)
	}
	return st, nil
}
