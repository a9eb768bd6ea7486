package rayjob

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// The shipped samples are valid RayJobs in the mode their name says.
func TestSamples(t *testing.T) {
	want := map[string]rayv1.JobSubmissionMode{
		"rayjob-k8sjob.yaml":  rayv1.K8sJobMode,
		"rayjob-http.yaml":    rayv1.HTTPMode,
		"rayjob-sidecar.yaml": rayv1.SidecarMode,
	}
	for file, mode := range want {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "configs", "samples", file))
			if err != nil {
				t.Fatal(err)
			}
			job := &rayv1.RayJob{}
			if err := yaml.UnmarshalStrict(data, job); err != nil {
				t.Fatalf("not a RayJob: %v", err)
			}
			if job.Kind != "RayJob" || job.APIVersion != "ray.io/v1" {
				t.Errorf("kind %s/%s", job.APIVersion, job.Kind)
			}
			if got := submissionMode(job); got != mode {
				t.Errorf("submission mode %s, want %s", got, mode)
			}
			if err := Validate(job); err != nil {
				t.Errorf("invalid: %v", err)
			}
			if c := rayparams.HeadContainer(job.Spec.RayClusterSpec); c == nil || c.Image != "rayctl.local/raysim:latest" {
				t.Errorf("head container %+v", c)
			}
		})
	}
}
