package apistatus

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// statusPatch is the strategic merge patch of pods/status taking an API
// object whose status is old to one whose status is next, as kubelet's
// status manager makes it: only what differs, and metadata.uid as a
// precondition (the API server refuses the patch with a conflict when the
// object was replaced by one of another UID). It is nil when the two
// statuses serialize alike: nothing to write.
func statusPatch(uid types.UID, old, next v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, fmt.Errorf("marshal status: %w", err)
	}
	nextJSON, err := json.Marshal(v1.Pod{Status: next})
	if err != nil {
		return nil, fmt.Errorf("marshal status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, nextJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("make status patch: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("read status patch: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}

// merge is the engine's status with the conditions others own kept.
func merge(api, ours v1.PodStatus) v1.PodStatus {
	out := *ours.DeepCopy()
	have := map[v1.PodConditionType]bool{}
	for _, c := range out.Conditions {
		have[c.Type] = true
	}
	for _, c := range api.Conditions {
		if !have[c.Type] {
			out.Conditions = append(out.Conditions, c)
		}
	}
	if out.NominatedNodeName == "" {
		out.NominatedNodeName = api.NominatedNodeName
	}
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	return out
}
