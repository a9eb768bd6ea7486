package rayservice

import (
	"crypto/sha1" //nolint:gosec // a change detector, not a security boundary (KubeRay uses SHA-1 too)
	"encoding/base32"
	"encoding/json"
	"maps"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// clusterSpecHash hashes a RayCluster spec without what may change under a running cluster: worker
// replica counts and workersToDelete (the autoscaler's), and suspend (applied in place).
func clusterSpecHash(spec rayv1.RayClusterSpec) (string, error) {
	s := spec.DeepCopy()
	s.Suspend = nil
	for i := range s.WorkerGroupSpecs {
		s.WorkerGroupSpecs[i].Replicas = nil
		s.WorkerGroupSpecs[i].ScaleStrategy.WorkersToDelete = nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	sum := sha1.Sum(b) //nolint:gosec // see the import
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]), nil
}

// buildCluster is the RayCluster named name a RayService asks for: its rayClusterConfig, its labels
// and annotations plus the origin labels and the spec's hash. The caller sets the controller reference.
func buildCluster(rs *rayv1.RayService, name string) (*rayv1.RayCluster, error) {
	hash, err := clusterSpecHash(rs.Spec.RayClusterSpec)
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(rs.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, originLabels(rs))
	ann := maps.Clone(rs.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
	ann[rayparams.AnnotationClusterHash] = hash
	ann[rayparams.AnnotationNumWorkerGroups] = strconv.Itoa(len(rs.Spec.RayClusterSpec.WorkerGroupSpecs))
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, Labels: labels, Annotations: ann},
		Spec:       *rs.Spec.RayClusterSpec.DeepCopy(),
	}, nil
}

// specMatch says how a RayService's cluster spec compares with what cluster was made from.
type specMatch int

const (
	// sameSpec: nothing to do.
	sameSpec specMatch = iota
	// groupsAdded: only worker groups were added at the end; the cluster is updated in place.
	groupsAdded
	// otherSpec: anything else; only a new cluster can carry it.
	otherSpec
)

// compareSpec compares rs's cluster spec with the one cluster was made from (its annotations).
func compareSpec(rs *rayv1.RayService, cluster *rayv1.RayCluster) specMatch {
	goal, err := clusterSpecHash(rs.Spec.RayClusterSpec)
	if err != nil {
		return otherSpec
	}
	have := cluster.Annotations[rayparams.AnnotationClusterHash]
	if goal == have {
		return sameSpec
	}
	n, err := strconv.Atoi(cluster.Annotations[rayparams.AnnotationNumWorkerGroups])
	groups := rs.Spec.RayClusterSpec.WorkerGroupSpecs
	if err != nil || n < 0 || len(groups) <= n {
		return otherSpec
	}
	prefix := rs.Spec.RayClusterSpec.DeepCopy()
	prefix.WorkerGroupSpecs = prefix.WorkerGroupSpecs[:n]
	if h, err := clusterSpecHash(*prefix); err == nil && h == have {
		return groupsAdded
	}
	return otherSpec
}

// zeroDowntimeUpgrade reports whether a cluster-spec change is rolled out on a new cluster:
// upgradeStrategy.type NewCluster or unset, and NewClusterWithIncrementalUpgrade where incremental
// upgrades run (the Gateway API is served); None, and NewClusterWithIncrementalUpgrade without the
// Gateway API, leave the running cluster as it is.
func zeroDowntimeUpgrade(rs *rayv1.RayService, incremental bool) bool {
	s := rs.Spec.UpgradeStrategy
	if s == nil || s.Type == nil {
		return true
	}
	return *s.Type == rayv1.RayServiceNewCluster || incremental && *s.Type == rayv1.RayServiceNewClusterWithIncrementalUpgrade
}

// shouldUpdateInPlace reports whether cluster is to be updated from the RayService's spec in place:
// a suspend toggle, or worker groups added at the end. The active cluster is left alone while an
// upgrade is in progress: the new spec goes to the pending one.
func shouldUpdateInPlace(rs *rayv1.RayService, cluster *rayv1.RayCluster, active bool) bool {
	if cluster == nil {
		return false
	}
	if active && upgradeInProgress(rs) {
		return false
	}
	if ptr.Deref(rs.Spec.RayClusterSpec.Suspend, false) != ptr.Deref(cluster.Spec.Suspend, false) {
		return true
	}
	return compareSpec(rs, cluster) == groupsAdded
}

// shouldPrepareNewCluster reports whether the RayService needs a new (pending) cluster: it has
// none yet, or its cluster spec changed in a way only a new cluster carries and upgrades are on.
// pendingServing says the Services already point at the pending cluster (it is being promoted);
// incremental that incremental upgrades run. No new cluster is prepared while a rollback runs.
func shouldPrepareNewCluster(rs *rayv1.RayService, active, pending *rayv1.RayCluster, pendingServing, incremental bool) bool {
	if pendingServing || rollingBack(rs) {
		return false
	}
	if active == nil && pending == nil {
		return true
	}
	c := pending
	if c == nil {
		c = active
	}
	if compareSpec(rs, c) != otherSpec {
		return false
	}
	return zeroDowntimeUpgrade(rs, incremental)
}
