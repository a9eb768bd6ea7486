package printers

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// templateColumns are the wide CONTAINERS IMAGES SELECTOR columns of the workload kinds.
func templateColumns(selector bool) []metav1.TableColumnDefinition {
	cols := []metav1.TableColumnDefinition{
		wideCol("Containers", "string", "Names of each container in the template."),
		wideCol("Images", "string", "Images referenced by each container in the template."),
	}
	if selector {
		cols = append(cols, wideCol("Selector", "string", "Label selector for pods. Existing pods selected by this will be the ones affected by this workload."))
	}
	return cols
}

// templateCells are the cells of templateColumns for a template and selector (nil: no selector column).
func templateCells(t *corev1.PodTemplateSpec, sel *metav1.LabelSelector, withSelector bool) []any {
	names, images := containerCells(t.Spec.Containers)
	if !withSelector {
		return []any{names, images}
	}
	return []any{names, images, metav1.FormatLabelSelector(sel)}
}

func replicas(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// NewDeploymentTableConvertor prints deployments as NAME READY UP-TO-DATE AVAILABLE AGE, wide
// CONTAINERS IMAGES SELECTOR.
func NewDeploymentTableConvertor() *Convertor[*appsv1.Deployment] {
	doc := appsv1.DeploymentStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn(),
		col("Ready", "string", "Number of the pod with ready state"),
		col("Up-to-date", "integer", doc["updatedReplicas"]),
		col("Available", "integer", doc["availableReplicas"]),
		ageColumn(),
	}
	return New(append(cols, templateColumns(true)...), func(d *appsv1.Deployment) []any {
		row := []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
			int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp)}
		return append(row, templateCells(&d.Spec.Template, d.Spec.Selector, true)...)
	})
}

// NewReplicaSetTableConvertor prints replica sets as NAME DESIRED CURRENT READY AGE, wide CONTAINERS
// IMAGES SELECTOR.
func NewReplicaSetTableConvertor() *Convertor[*appsv1.ReplicaSet] {
	doc := appsv1.ReplicaSetStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn(),
		col("Desired", "integer", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
		col("Current", "integer", doc["replicas"]),
		col("Ready", "integer", doc["readyReplicas"]),
		ageColumn(),
	}
	return New(append(cols, templateColumns(true)...), func(rs *appsv1.ReplicaSet) []any {
		row := []any{rs.Name, int64(replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), Age(rs.CreationTimestamp)}
		return append(row, templateCells(&rs.Spec.Template, rs.Spec.Selector, true)...)
	})
}

// NewStatefulSetTableConvertor prints stateful sets as NAME READY AGE, wide CONTAINERS IMAGES.
func NewStatefulSetTableConvertor() *Convertor[*appsv1.StatefulSet] {
	cols := []metav1.TableColumnDefinition{
		nameColumn(),
		col("Ready", "string", "Number of the pod with ready state"),
		ageColumn(),
	}
	return New(append(cols, templateColumns(false)...), func(s *appsv1.StatefulSet) []any {
		row := []any{s.Name, fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, replicas(s.Spec.Replicas)), Age(s.CreationTimestamp)}
		return append(row, templateCells(&s.Spec.Template, nil, false)...)
	})
}

// NewDaemonSetTableConvertor prints daemon sets as NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE
// NODE SELECTOR AGE, wide CONTAINERS IMAGES SELECTOR.
func NewDaemonSetTableConvertor() *Convertor[*appsv1.DaemonSet] {
	doc := appsv1.DaemonSetStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn(),
		col("Desired", "integer", doc["desiredNumberScheduled"]),
		col("Current", "integer", doc["currentNumberScheduled"]),
		col("Ready", "integer", doc["numberReady"]),
		col("Up-to-date", "integer", doc["updatedNumberScheduled"]),
		col("Available", "integer", doc["numberAvailable"]),
		col("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
		ageColumn(),
	}
	return New(append(cols, templateColumns(true)...), func(ds *appsv1.DaemonSet) []any {
		sel := labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector)
		st := ds.Status
		row := []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
			int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), sel, Age(ds.CreationTimestamp)}
		return append(row, templateCells(&ds.Spec.Template, ds.Spec.Selector, true)...)
	})
}

// NewControllerRevisionTableConvertor prints controller revisions as NAME CONTROLLER REVISION AGE, the
// controller written kind.group/name (e.g. statefulset.apps/web).
func NewControllerRevisionTableConvertor() *Convertor[*appsv1.ControllerRevision] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Controller", "string", "Controller of the object"),
		col("Revision", "integer", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
		ageColumn(),
	}, func(r *appsv1.ControllerRevision) []any {
		controller := "<none>"
		if ref := metav1.GetControllerOf(r); ref != nil {
			group := ref.APIVersion
			if i := strings.Index(group, "/"); i >= 0 {
				group = group[:i]
			} else {
				group = ""
			}
			controller = strings.ToLower(ref.Kind)
			if group != "" {
				controller += "." + group
			}
			controller += "/" + ref.Name
		}
		return []any{r.Name, controller, r.Revision, Age(r.CreationTimestamp)}
	})
}
