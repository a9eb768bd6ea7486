// Package job is the registry of batch/v1 jobs (with status).
package job

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes jobs to the shared store.
var Resource = &registry.Resource{
	Resource:             batchv1.Resource("jobs"),
	Singular:             "job",
	Version:              "v1",
	Kind:                 "Job",
	New:                  func() runtime.Object { return &batchv1.Job{} },
	NewList:              func() runtime.Object { return &batchv1.JobList{} },
	Namespaced:           true,
	HasStatus:            true,
	Validate:             validateCreate,
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateJobUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateJobStatusUpdate),
	SelectableFields: map[string]func(runtime.Object) string{
		"status.successful": func(o runtime.Object) string { return strconv.Itoa(int(o.(*batchv1.Job).Status.Succeeded)) },
	},
	Categories: []string{"all"},
}

// validateCreate generates the job's selector first (the new object has its UID by now, as Kubernetes
// also arranges it), then validates.
func validateCreate(obj runtime.Object) field.ErrorList {
	job := obj.(*batchv1.Job)
	defaults.SetJobSelector(job)
	return validation.ValidateJob(job)
}
