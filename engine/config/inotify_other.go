//go:build !linux

package config

import (
	"errors"
	"io"
)

func watchInotify(string, chan<- struct{}, *removedSet) (io.Closer, error) {
	return nil, errors.New("inotify is linux only")
}
