package rayjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// spec.deletionStrategy, as KubeRay v1.7 runs it with its RayJobDeletionPolicy gate on (the default):
// either the legacy pair onSuccess/onFailure, applied ttlSecondsAfterFinished after the end, or
// deletionRules, each applied its own ttlSeconds after the end once its condition (a jobStatus or a
// jobDeploymentStatus) matches. The policies: DeleteWorkers suspends every worker group of the
// RayJob's cluster (its worker Pods go, the head stays), DeleteCluster deletes the RayCluster,
// DeleteSelf deletes the RayJob (and with it, through owner references, what it made), DeleteNone
// does nothing.

// deletionOrder ranks the policies from least to most destructive. Rules of one condition must
// have TTLs that do not decrease along it, and of several rules due at once the highest runs.
var deletionOrder = []rayv1.DeletionPolicyType{rayv1.DeleteNone, rayv1.DeleteWorkers, rayv1.DeleteCluster, rayv1.DeleteSelf}

func deletionRank(p rayv1.DeletionPolicyType) int {
	for i, q := range deletionOrder {
		if p == q {
			return i
		}
	}
	return -1
}

// validateDeletionStrategy checks spec.deletionStrategy against the rest of the spec with KubeRay
// v1.7's rules and messages (the messages are what users see in status.message and the event).
// The CRD's own schema already refuses a condition naming both or neither trigger, a negative TTL,
// an empty rule list and legacy fields mixed with rules; the same checks here cover objects the
// schema did not see (stored before, or made by a client that skipped it).
func validateDeletionStrategy(job *rayv1.RayJob) error {
	ds := job.Spec.DeletionStrategy
	if ds == nil {
		return nil
	}
	legacy := ds.OnSuccess != nil || ds.OnFailure != nil
	rules := len(ds.DeletionRules) > 0
	switch {
	case rules && job.Spec.ShutdownAfterJobFinishes:
		return invalid(EventInvalidSpec, "The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive")
	case rules && legacy:
		return invalid(EventInvalidSpec, "The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously")
	case legacy:
		return validateLegacyPolicies(job)
	case rules:
		return validateDeletionRules(job)
	default:
		return invalid(EventInvalidSpec, "The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)")
	}
}

// validateLegacyPolicies checks onSuccess/onFailure: both set, each with a policy, none that touches
// a cluster the RayJob does not own, no DeleteWorkers under the autoscaler, no DeleteNone beside
// shutdownAfterJobFinishes.
func validateLegacyPolicies(job *rayv1.RayJob) error {
	ds := job.Spec.DeletionStrategy
	if ds.OnSuccess == nil || ds.OnFailure == nil {
		return invalid(EventInvalidSpec, "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy")
	}
	if ds.OnSuccess.Policy == nil {
		return invalid(EventInvalidSpec, "the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled")
	}
	if ds.OnFailure.Policy == nil {
		return invalid(EventInvalidSpec, "the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy is enabled")
	}
	onSuccess, onFailure := *ds.OnSuccess.Policy, *ds.OnFailure.Policy
	if usesClusterSelector(job) {
		for _, c := range []struct {
			policy rayv1.DeletionPolicyType
			when   string
		}{{onSuccess, "success"}, {onFailure, "failure"}} {
			if touchesCluster(c.policy) {
				return invalid(EventInvalidSpec, "the ClusterSelector mode doesn't support DeletionStrategy=%s on %s", c.policy, c.when)
			}
		}
	}
	if (onSuccess == rayv1.DeleteWorkers || onFailure == rayv1.DeleteWorkers) && autoscaling(job) {
		return invalid(EventInvalidSpec, "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled")
	}
	if job.Spec.ShutdownAfterJobFinishes && (onSuccess == rayv1.DeleteNone || onFailure == rayv1.DeleteNone) {
		return invalid(EventInvalidSpec, "The RayJob spec is invalid: shutdownAfterJobFinishes is set to 'true' while deletion policy is 'DeleteNone'")
	}
	return nil
}

// ruleTrigger is what a rule's condition matches: which status field and its value.
type ruleTrigger struct{ field, value string }

func triggerOf(c rayv1.DeletionCondition) ruleTrigger {
	if c.JobStatus != nil {
		return ruleTrigger{"JobStatus", string(*c.JobStatus)}
	}
	return ruleTrigger{"JobDeploymentStatus", string(*c.JobDeploymentStatus)}
}

// validateDeletionRules checks every rule and reports all that is wrong at once, one line each: a
// condition with both triggers or none, a negative TTL, a policy on a cluster the RayJob does not
// own, DeleteWorkers under the autoscaler, two rules of one policy on one trigger, and TTLs that
// would delete in the wrong order (workers, then the cluster, then the RayJob).
func validateDeletionRules(job *rayv1.RayJob) error {
	var errs []error
	var order []ruleTrigger // triggers in the order they first appear, for a stable message
	ttls := map[ruleTrigger]map[rayv1.DeletionPolicyType]int32{}
	for i, rule := range job.Spec.DeletionStrategy.DeletionRules {
		c := rule.Condition
		switch {
		case c.JobStatus != nil && c.JobDeploymentStatus != nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: cannot set both JobStatus and JobDeploymentStatus at the same time", i))
			continue
		case c.JobStatus == nil && c.JobDeploymentStatus == nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: exactly one of JobStatus and JobDeploymentStatus must be set", i))
			continue
		case c.TTLSeconds < 0:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: TTLSeconds must be non-negative", i))
			continue
		case usesClusterSelector(job) && touchesCluster(rule.Policy):
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType '%s' not supported when ClusterSelector is set", i, rule.Policy))
			continue
		case rule.Policy == rayv1.DeleteWorkers && autoscaling(job):
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled", i))
			continue
		}
		tr := triggerOf(c)
		if ttls[tr] == nil {
			ttls[tr] = map[rayv1.DeletionPolicyType]int32{}
			order = append(order, tr)
		}
		if _, dup := ttls[tr][rule.Policy]; dup {
			errs = append(errs, fmt.Errorf("deletionRules[%d]: duplicate rule for DeletionPolicyType '%s' and %s '%s'", i, rule.Policy, tr.field, tr.value))
			continue
		}
		ttls[tr][rule.Policy] = c.TTLSeconds
	}
	for _, tr := range order {
		var prev rayv1.DeletionPolicyType
		for _, p := range deletionOrder[1:] { // DeleteNone has no place in the order
			ttl, ok := ttls[tr][p]
			if !ok {
				continue
			}
			if prev != "" && ttl < ttls[tr][prev] {
				errs = append(errs, fmt.Errorf("for %s '%s': %s TTL (%d) must be >= %s TTL (%d)", tr.field, tr.value, p, ttl, prev, ttls[tr][prev]))
			}
			prev = p
		}
	}
	if err := errors.Join(errs...); err != nil {
		return invalid(EventInvalidSpec, "%s", err.Error())
	}
	return nil
}

// touchesCluster reports whether a policy acts on the RayJob's RayCluster.
func touchesCluster(p rayv1.DeletionPolicyType) bool {
	return p == rayv1.DeleteCluster || p == rayv1.DeleteWorkers
}

// autoscaling reports whether the cluster the RayJob makes runs the in-tree autoscaler.
func autoscaling(job *rayv1.RayJob) bool {
	s := job.Spec.RayClusterSpec
	return s != nil && ptr.Deref(s.EnableInTreeAutoscaling, false)
}

// applyDeletionStrategy runs spec.deletionStrategy for a finished RayJob whose cluster it owns: the
// due action that destroys most, if any (at most one write per pass; the watch on the RayCluster or
// the RayJob brings the next pass), then a requeue for the next rule not yet due.
func (p *pass) applyDeletionStrategy(ctx context.Context) (reconcile.Result, error) {
	ds := p.job.Spec.DeletionStrategy
	if len(ds.DeletionRules) == 0 {
		return p.applyLegacyPolicy(ctx)
	}
	end := p.endTime()
	var (
		due  *rayv1.DeletionRule
		next time.Time
	)
	for i := range ds.DeletionRules {
		rule := &ds.DeletionRules[i]
		if !p.ruleMatches(rule.Condition) {
			continue
		}
		at := end.Add(time.Duration(rule.Condition.TTLSeconds) * time.Second)
		if p.now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		done, err := p.deletionDone(ctx, rule.Policy)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !done && (due == nil || deletionRank(rule.Policy) > deletionRank(due.Policy)) {
			due = rule
		}
	}
	if due != nil {
		p.log.Info("applying a deletion rule", "policy", due.Policy, "trigger", triggerOf(due.Condition), "ttlSeconds", due.Condition.TTLSeconds)
		if err := p.applyDeletionPolicy(ctx, due.Policy); err != nil {
			return reconcile.Result{}, err
		}
	}
	if next.IsZero() {
		return reconcile.Result{}, nil
	}
	return p.requeueAt(next), nil
}

// applyLegacyPolicy runs onSuccess or onFailure (by the Ray job's status) once
// ttlSecondsAfterFinished has passed since the end. A job that ended otherwise (stopped, or its
// deployment failed before the Ray job did) gets neither.
func (p *pass) applyLegacyPolicy(ctx context.Context) (reconcile.Result, error) {
	ds := p.job.Spec.DeletionStrategy
	var policy rayv1.DeletionPolicyType
	switch p.status().JobStatus {
	case rayv1.JobStatusSucceeded:
		policy = ptr.Deref(ds.OnSuccess.Policy, rayv1.DeleteNone)
	case rayv1.JobStatusFailed:
		policy = ptr.Deref(ds.OnFailure.Policy, rayv1.DeleteNone)
	default:
		return reconcile.Result{}, nil
	}
	if policy == rayv1.DeleteNone {
		return reconcile.Result{}, nil
	}
	if at := p.endTime().Add(time.Duration(p.job.Spec.TTLSecondsAfterFinished) * time.Second); p.now.Before(at) {
		return p.requeueAt(at), nil
	}
	done, err := p.deletionDone(ctx, policy)
	if err != nil || done {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, p.applyDeletionPolicy(ctx, policy)
}

// ruleMatches reports whether the RayJob's status is what a rule's condition names.
func (p *pass) ruleMatches(c rayv1.DeletionCondition) bool {
	if c.JobStatus != nil {
		return *c.JobStatus == p.status().JobStatus
	}
	return c.JobDeploymentStatus != nil && *c.JobDeploymentStatus == p.status().JobDeploymentStatus
}

// endTime is when the RayJob ended (status.endTime; now if it was never written).
func (p *pass) endTime() time.Time {
	if t := p.status().EndTime; t != nil {
		return t.Time
	}
	return p.now
}

// requeueAt asks for the next pass just after t: status times are stored to the second, so a little
// slack keeps the pass from waking up before t.
func (p *pass) requeueAt(t time.Time) reconcile.Result {
	return reconcile.Result{RequeueAfter: t.Sub(p.now) + time.Second}
}

// deletionDone reports whether what a policy would bring about holds already: the cluster gone or
// going (DeleteCluster, and DeleteWorkers too), every worker group suspended (DeleteWorkers).
func (p *pass) deletionDone(ctx context.Context, policy rayv1.DeletionPolicyType) (bool, error) {
	switch policy {
	case rayv1.DeleteNone:
		return true, nil
	case rayv1.DeleteSelf:
		return false, nil
	}
	cluster, err := p.ownedCluster(ctx)
	if err != nil {
		return false, err
	}
	if cluster == nil || !cluster.DeletionTimestamp.IsZero() {
		return true, nil
	}
	if policy == rayv1.DeleteCluster {
		return false, nil
	}
	for _, g := range cluster.Spec.WorkerGroupSpecs {
		if !ptr.Deref(g.Suspend, false) {
			return false, nil
		}
	}
	return true, nil
}

// ownedCluster is the RayJob's RayCluster, nil if it has none (any more).
func (p *pass) ownedCluster(ctx context.Context) (*rayv1.RayCluster, error) {
	if p.status().RayClusterName == "" {
		return nil, nil
	}
	cluster := &rayv1.RayCluster{}
	if err := p.r.client.Get(ctx, clusterKey(p.job), cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return cluster, nil
}

// applyDeletionPolicy does what a policy says, once.
func (p *pass) applyDeletionPolicy(ctx context.Context, policy rayv1.DeletionPolicyType) error {
	switch policy {
	case rayv1.DeleteCluster:
		_, err := p.deleteCluster(ctx)
		return err
	case rayv1.DeleteWorkers:
		return p.suspendWorkerGroups(ctx)
	case rayv1.DeleteSelf:
		p.log.Info("deleting the RayJob, as its deletion strategy says")
		return client.IgnoreNotFound(p.r.client.Delete(ctx, p.job))
	}
	return nil
}

// suspendWorkerGroups sets suspend on every worker group of the RayJob's cluster, so that the
// RayCluster controller deletes the worker Pods and keeps the head. It patches only those fields,
// each guarded by a test of the group's name at its index, so that a group list changed meanwhile
// makes the patch fail (and the pass retry) rather than suspend the wrong group, and so that the
// fields of newer KubeRay versions the Go types lack are kept.
func (p *pass) suspendWorkerGroups(ctx context.Context) error {
	cluster, err := p.ownedCluster(ctx)
	if err != nil || cluster == nil {
		return err
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	for i, g := range cluster.Spec.WorkerGroupSpecs {
		base := fmt.Sprintf("/spec/workerGroupSpecs/%d", i)
		ops = append(ops, op{"test", base + "/groupName", g.GroupName}, op{"add", base + "/suspend", true})
	}
	if len(ops) == 0 {
		return nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := p.r.client.Patch(ctx, cluster, client.RawPatch(types.JSONPatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		p.event(corev1.EventTypeWarning, EventFailedUpdateCluster, "Failed to suspend worker groups in cluster %s/%s: %v", cluster.Namespace, cluster.Name, err)
		return err
	}
	p.log.Info("suspended the RayCluster's worker groups", "rayCluster", cluster.Name)
	p.event(corev1.EventTypeNormal, EventUpdatedCluster, "Suspended every worker group of cluster %s/%s (DeleteWorkers): its worker Pods go, its head stays", cluster.Namespace, cluster.Name)
	return nil
}
