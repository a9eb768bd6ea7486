package fake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

func TestContainersFollowTheirScript(t *testing.T) {
	ctx := context.Background()
	r := New(Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) Script {
		if cfg.Name == "short" {
			return Script{RunFor: time.Millisecond, ExitCode: 7}
		}
		return Script{StartDelay: time.Hour}
	}})
	sb, err := r.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "u"})
	if err != nil || sb.IP == "" {
		t.Fatalf("sandbox %+v, %v", sb, err)
	}
	short, _ := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "short", Attempt: 2})
	slow, _ := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "slow"})
	for _, id := range []string{short, slow} {
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := r.ContainerStatus(ctx, short)
		if st.State == runtime.StateExited {
			if st.ExitCode != 7 || st.Reason != "Error" || st.Attempt != 2 || st.PodUID != "u" {
				t.Errorf("exited status = %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("short container never exited")
		}
		time.Sleep(time.Millisecond)
	}
	if st, _ := r.ContainerStatus(ctx, slow); st.State != runtime.StateCreated {
		t.Errorf("slow container state = %s, want created during its start delay", st.State)
	}
	if err := r.RemoveSandbox(ctx, "u"); err == nil {
		t.Error("removed a sandbox that still has containers")
	}
	if err := r.StopContainer(ctx, slow, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{short, slow} {
		if err := r.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ContainerStatus(ctx, slow); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("removed container: %v", err)
	}
	if h := r.History(); len(h) != 2 || !h[1].Removed || h[1].StopGrace != 3*time.Second {
		t.Errorf("history = %+v", h)
	}
	if err := r.RemoveSandbox(ctx, "u"); err != nil {
		t.Fatal(err)
	}
}

func TestImagesHonourPullPolicy(t *testing.T) {
	ctx := context.Background()
	r := New(Options{Images: []string{"present:1"}})
	if _, err := r.EnsureImage(ctx, "present:1", runtime.PullIfNotPresent, nil); err != nil || r.Pulls("present:1") != 0 {
		t.Errorf("present image pulled (%d) or failed: %v", r.Pulls("present:1"), err)
	}
	if _, err := r.EnsureImage(ctx, "present:1", runtime.PullAlways, nil); err != nil || r.Pulls("present:1") != 1 {
		t.Errorf("Always did not pull: %v", err)
	}
	if _, err := r.EnsureImage(ctx, "absent:1", runtime.PullNever, nil); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("Never on an absent image: %v", err)
	}
}

func TestByDefaultInitContainersCompleteAndOthersRun(t *testing.T) {
	ctx := context.Background()
	r := New(Options{})
	sb, err := r.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	setup, _ := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "setup", Init: true})
	main, _ := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "main"})
	for _, id := range []string{setup, main} {
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _ := r.ContainerStatus(ctx, setup)
		if st.State == runtime.StateExited {
			if st.ExitCode != 0 || st.Reason != "Completed" {
				t.Errorf("init container ended %+v, want exit 0 Completed", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the init container never exited")
		}
	}
	if st, _ := r.ContainerStatus(ctx, main); st.State != runtime.StateRunning {
		t.Errorf("main container state = %s, want running", st.State)
	}
}
