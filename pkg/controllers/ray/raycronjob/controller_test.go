package raycronjob

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func cronJob(name string, spec map[string]any) *unstructured.Unstructured {
	u := newCronJob()
	u.SetName(name)
	u.SetNamespace("default")
	u.Object["spec"] = spec
	return u
}

func template() map[string]any {
	return map[string]any{
		"entrypoint": "echo hi",
		"rayClusterSpec": map[string]any{"headGroupSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "ray-head", "image": "rayctl.local/raysim:latest"}},
		}}}},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, cronName string
		spec           map[string]any
		wantErr        string
	}{
		{"five fields", "ok", map[string]any{"schedule": "*/5 * * * *", "jobTemplate": template()}, ""},
		{"descriptor and zone", "ok", map[string]any{"schedule": "@every 10s", "timeZone": "Asia/Tokyo", "jobTemplate": template()}, ""},
		{"bad schedule", "ok", map[string]any{"schedule": "every day", "jobTemplate": template()}, "invalid cron schedule"},
		{"zone in schedule", "ok", map[string]any{"schedule": "CRON_TZ=UTC * * * * *", "jobTemplate": template()}, "use the timeZone field"},
		{"unknown zone", "ok", map[string]any{"schedule": "@hourly", "timeZone": "Nowhere/Atlantis", "jobTemplate": template()}, "invalid time zone"},
		{"empty zone", "ok", map[string]any{"schedule": "@hourly", "timeZone": "", "jobTemplate": template()}, "timeZone must not be empty"},
		{"long name", strings.Repeat("a", MaxNameLength+1), map[string]any{"schedule": "@hourly", "jobTemplate": template()}, "no more than"},
		{"bad template", "ok", map[string]any{"schedule": "@hourly", "jobTemplate": map[string]any{"entrypoint": "echo"}}, "invalid RayJob template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Validate(cronJob(tc.cronName, tc.spec))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDueTimes(t *testing.T) {
	every, err := cron.ParseStandard("@every 10s")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		now        time.Time
		wantDue    time.Time
		wantMissed int
		wantNext   time.Time
	}{
		{"nothing due", start.Add(5 * time.Second), time.Time{}, 0, start.Add(10 * time.Second)},
		{"one due", start.Add(12 * time.Second), start.Add(10 * time.Second), 0, start.Add(20 * time.Second)},
		{"due exactly now", start.Add(20 * time.Second), start.Add(20 * time.Second), 1, start.Add(30 * time.Second)},
		{"a night asleep", start.Add(8 * time.Hour), start.Add(8 * time.Hour), 8*360 - 1, start.Add(8*time.Hour + 10*time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, missed, next := dueTimes(every, start, tc.now)
			if !due.Equal(tc.wantDue) || missed != tc.wantMissed || !next.Equal(tc.wantNext) {
				t.Fatalf("dueTimes = %v, %d, %v; want %v, %d, %v", due, missed, next, tc.wantDue, tc.wantMissed, tc.wantNext)
			}
		})
	}
}

func TestJobName(t *testing.T) {
	minute := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	if got, want := JobName("daily", minute), "daily-29453761"; got != want {
		t.Errorf("JobName on a whole minute = %q, want %q (minutes since the epoch, as KubeRay)", got, want)
	}
	if got, want := JobName("fast", minute.Add(10*time.Second)), "fast-1767225670"; got != want {
		t.Errorf("JobName within a minute = %q, want %q (seconds since the epoch)", got, want)
	}
}
