package preload_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/pkg/runtime/preload"
)

// A pull of a preloaded image waits for the load instead of failing against a registry.
func TestPullWaitsForPreload(t *testing.T) {
	const ref = "rayctl.local/raysim:latest"
	release := make(chan struct{})
	rt := fake.New(fake.Options{PullError: func(image string) error {
		return errors.New("registry unreachable")
	}})
	loaded := false
	wrapped := preload.Start(context.Background(), rt, preload.Image{
		Ref: ref,
		Write: func(w io.Writer) error {
			<-release
			_, err := w.Write([]byte("tarball"))
			return err
		},
		Loaded: func() { loaded = true },
	})
	done := make(chan error, 1)
	go func() {
		_, err := wrapped.EnsureImage(context.Background(), ref, runtime.PullIfNotPresent, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("EnsureImage returned before the preload finished: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := wrapped.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !loaded {
		t.Error("Loaded was not called")
	}
	<-done // the fake names imports itself, so the pull may still fail; what matters is that it waited
}

// An image the runtime already holds is not built again.
func TestPresentImageIsNotRebuilt(t *testing.T) {
	rt := fake.New(fake.Options{})
	wrapped := preload.Start(context.Background(), rt, preload.Image{
		Ref:     "x",
		Present: func(context.Context, runtime.Runtime) bool { return true },
		Write:   func(io.Writer) error { t.Error("image built although present"); return nil },
	})
	if err := wrapped.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A failed build is reported to whoever waits.
func TestLoadErrorIsReported(t *testing.T) {
	rt := fake.New(fake.Options{})
	wrapped := preload.Start(context.Background(), rt, preload.Image{
		Ref:   "x",
		Write: func(io.Writer) error { return errors.New("no busybox") },
	})
	if _, err := wrapped.EnsureImage(context.Background(), "x", runtime.PullIfNotPresent, nil); err == nil {
		t.Fatal("want the build error")
	}
}
