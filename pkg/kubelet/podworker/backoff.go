package podworker

import "time"

// BackoffConfig is the doubling delay between restarts of a crashing container, and between image pulls.
type BackoffConfig struct {
	// Initial is the first delay (the kubelet's is 10s); Max caps it (5m).
	Initial, Max time.Duration
}

// DefaultBackoff is the upstream kubelet's.
var DefaultBackoff = BackoffConfig{Initial: 10 * time.Second, Max: 5 * time.Minute}

// backoff is one key's state: the first attempt goes at once, each later one waits the current delay
// (measured from the failure), which doubles up to the maximum. A key left alone for twice the maximum
// starts over.
type backoff struct {
	delay      time.Duration
	lastUpdate time.Time
}

// waitUntil returns when the next attempt may go, given the failure at since; zero means now.
func (b *backoff) waitUntil(cfg BackoffConfig, since, now time.Time) time.Time {
	if b.delay == 0 || now.Sub(b.lastUpdate) > 2*cfg.Max {
		return time.Time{}
	}
	if until := since.Add(b.delay); now.Before(until) {
		return until
	}
	return time.Time{}
}

// next records an attempt, growing the delay.
func (b *backoff) next(cfg BackoffConfig, now time.Time) {
	switch {
	case b.delay == 0 || now.Sub(b.lastUpdate) > 2*cfg.Max:
		b.delay = cfg.Initial
	default:
		b.delay *= 2
		if b.delay > cfg.Max {
			b.delay = cfg.Max
		}
	}
	b.lastUpdate = now
}

func (b *backoff) reset() { *b = backoff{} }
