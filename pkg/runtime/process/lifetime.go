package process

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// endGrace is how long Close waits, with ContainersEndWithRuntime, between a
// container's SIGTERM and its SIGKILL: short, since rayctl is on its way out.
const endGrace = 5 * time.Second

// leftoverMessage is the status message of a container a previous Runtime
// left running, killed by New with ContainersEndWithRuntime.
const leftoverMessage = "killed when rayctl restarted: containers end with the rayctl that started them " +
	"(a rootless rayctl cannot enter the user namespace an earlier one ran them in)"

// stopAll stops every container this Runtime watches, all at once, each as
// StopContainer does with grace.
func (r *Runtime) stopAll(grace time.Duration) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.live))
	for id := range r.live {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.StopContainer(ctx, id, grace)
		}()
	}
	wg.Wait()
}

// killLeftover SIGKILLs the process group of a container a previous Runtime
// started and waits a little for its leader to go. (Its init's death ends the
// container's PID namespace, and so the rest of it.)
func killLeftover(pid int, ticks uint64) {
	_ = unix.Kill(-pid, unix.SIGKILL)
	for i := 0; i < 100 && sameProcess(pid, ticks); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}
