package engine

import (
	"slices"
	"time"
)

// The creation times of a container's runtime instances, which container
// GC reads for its minimum age (RemoveContainer).

// instanceTime is when one runtime instance of a container was created.
type instanceTime struct {
	id string
	at time.Time
}

// setCreated records that instance id was created at at. A container keeps
// a few instances (ContainerGC.MaxPerContainer): a slice, not a map.
func (c *ctrState) setCreated(id string, at time.Time) {
	for i := range c.created {
		if c.created[i].id == id {
			c.created[i].at = at
			return
		}
	}
	c.created = append(c.created, instanceTime{id: id, at: at})
}

// createdAt is when instance id was created, if recorded.
func (c *ctrState) createdAt(id string) (time.Time, bool) {
	for i := range c.created {
		if c.created[i].id == id {
			return c.created[i].at, true
		}
	}
	return time.Time{}, false
}

// forgetCreated drops the creation time of instance id.
func (c *ctrState) forgetCreated(id string) {
	c.created = slices.DeleteFunc(c.created, func(t instanceTime) bool { return t.id == id })
}
