//go:build !linux

package network

import "errors"

var errNotLinux = errors.New("network: pod network namespaces need Linux; use a HostOnly manager")

// Setup needs Linux; elsewhere pods share the host's network (HostOnly).
func (m *Manager) Setup(podUID string) (*Attachment, error) { return nil, errNotLinux }

func (m *Manager) removeLinkAndNS(podUID string) error { return nil }

// RemoveBridge has nothing to remove off Linux.
func (m *Manager) RemoveBridge() error { return nil }

// Do runs fn; off Linux there are no network namespaces to enter.
func Do(path string, fn func() error) error {
	if path != "" {
		return errNotLinux
	}
	return fn()
}
