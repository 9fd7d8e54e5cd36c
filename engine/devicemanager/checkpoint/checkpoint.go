// Package checkpoint is the device manager's checkpoint file in kubelet's
// format (pkg/kubelet/cm/devicemanager/checkpoint): the file
// `kubelet_internal_checkpoint` in the device-plugins directory, JSON of
// {"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
// "Checksum": N}, the checksum kubelet's (FNV-32a over the data printed by
// apimachinery's dump.ForHash). The package and type names are kubelet's
// because the printed data names them: a file one writes, the other reads.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/dump"
)

// FileName is kubelet's name of the checkpoint file.
const FileName = "kubelet_internal_checkpoint"

// DevicesPerNUMA are the device IDs of an allocation by NUMA node (-1: a
// device without topology).
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one allocation: the devices of one resource given to
// one container of a pod, and the plugin's Allocate response
// (ContainerAllocateResponse, protobuf wire format).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is what the checksum covers.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the file's content.
type Data struct {
	Data     checkpointData
	Checksum uint64
}

// ErrNotFound: there is no checkpoint file.
var ErrNotFound = errors.New("checkpoint is not found")

// New is a checkpoint of the entries and the healthy devices of each
// registered resource.
func New(entries []PodDevicesEntry, registered map[string][]string) *Data {
	if entries == nil {
		entries = []PodDevicesEntry{}
	}
	if registered == nil {
		registered = map[string][]string{}
	}
	return &Data{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
}

// Entries are the checkpoint's allocations.
func (d *Data) Entries() []PodDevicesEntry { return d.Data.PodDeviceEntries }

// Registered are the healthy devices of each resource registered when the
// checkpoint was written.
func (d *Data) Registered() map[string][]string { return d.Data.RegisteredDevices }

// checksum is kubelet's checksum of the data (checksum.New: FNV-32a of
// hashutil.DeepHashObject).
func checksum(data checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}

func path(dir string) string { return filepath.Join(dir, FileName) }

// Write writes d into dir atomically (a temporary file renamed over the
// old one, as kubelet's file store does).
func Write(dir string, d *Data) error {
	d.Checksum = checksum(d.Data)
	blob, err := json.Marshal(*d)
	if err != nil {
		return fmt.Errorf("encode device checkpoint: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+FileName+".*")
	if err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if _, err := tmp.Write(blob); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path(dir)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	return nil
}

// Read reads the checkpoint of dir: ErrNotFound without one; an error
// naming the file when it cannot be decoded or its checksum is wrong
// (kubelet's CorruptCheckpointError).
func Read(dir string) (*Data, error) {
	blob, err := os.ReadFile(path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read device checkpoint: %w", err)
	}
	d := New(nil, nil)
	if err := json.Unmarshal(blob, d); err != nil {
		return nil, fmt.Errorf("device checkpoint %s: %w", path(dir), err)
	}
	if d.Checksum != checksum(d.Data) {
		return nil, fmt.Errorf("device checkpoint %s is corrupt: checksum %d, its data's %d", path(dir), d.Checksum, checksum(d.Data))
	}
	return d, nil
}
