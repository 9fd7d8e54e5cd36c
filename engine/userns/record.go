package userns

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The record of a pod's range in its pod directory, in kubelet's format.

// Mapping is one ID mapping of a record (kubelet's idMapping).
type Mapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// record is a pod's record file (kubelet's userNamespace).
type record struct {
	UIDMappings []Mapping `json:"uidMappings"`
	GIDMappings []Mapping `json:"gidMappings"`
}

// option is the CRI option of a record.
func (r *record) option() *runtimeapi.UserNamespace {
	conv := func(ms []Mapping) []*runtimeapi.IDMapping {
		out := make([]*runtimeapi.IDMapping, len(ms))
		for i, x := range ms {
			out[i] = &runtimeapi.IDMapping{HostId: x.HostID, ContainerId: x.ContainerID, Length: x.Length}
		}
		return out
	}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: conv(r.UIDMappings), Gids: conv(r.GIDMappings)}
}

func (m *Manager) recordPath(uid types.UID) string {
	return filepath.Join(m.cfg.PodsDir, string(uid), RecordFile)
}

// readRecord reads pod uid's record; nil without one.
func (m *Manager) readRecord(uid types.UID) (*record, error) {
	b, err := os.ReadFile(m.recordPath(uid))
	if os.IsNotExist(err) || err == nil && len(b) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	return &rec, nil
}

// writeRecord writes pod uid's record durably: a temporary file renamed
// into place, then the directory synced (kubelet's file store and fsync).
func (m *Manager) writeRecord(uid types.UID, rec *record) error {
	dir := filepath.Dir(m.recordPath(uid))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("write user namespace record: %w", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+RecordFile+"-*")
	if err != nil {
		return fmt.Errorf("write user namespace record: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), m.recordPath(uid))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write user namespace record: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write user namespace record: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write user namespace record: %w", err)
	}
	return nil
}
