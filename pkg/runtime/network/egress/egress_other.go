//go:build !linux

package egress

import "errors"

// Egress is the node namespace's way out; off Linux there is no node namespace.
type Egress struct{}

// Start needs Linux: elsewhere pods share the host's network and its way out.
func Start(cfg Config) (*Egress, error) {
	return nil, errors.New("egress: a node network namespace needs Linux")
}

// On says whether pods have a way out.
func (e *Egress) On() bool { return false }

// Line says in a line what pods reach.
func (e *Egress) Line() string { return "" }

// Close has nothing to stop.
func (e *Egress) Close() error { return nil }
