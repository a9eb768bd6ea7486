package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults of apps/v1 that kube-apiserver applies when a field is unset.
const (
	// DefaultRevisionHistoryLimit is how many old ReplicaSets or ControllerRevisions a workload keeps.
	DefaultRevisionHistoryLimit int32 = 10
	// DefaultProgressDeadlineSeconds is how long a Deployment may make no progress before it reports
	// ProgressDeadlineExceeded.
	DefaultProgressDeadlineSeconds int32 = 600
)

func int32Ptr(v int32) *int32 { return &v }

// SetDeploymentDefaults defaults a Deployment: replicas 1, strategy RollingUpdate with maxUnavailable
// and maxSurge 25%, revisionHistoryLimit 10, progressDeadlineSeconds 600, and the pod template's defaults.
func SetDeploymentDefaults(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = int32Ptr(1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			v := quarter
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &v
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			v := quarter
			d.Spec.Strategy.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = int32Ptr(DefaultRevisionHistoryLimit)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = int32Ptr(DefaultProgressDeadlineSeconds)
	}
	SetPodTemplateSpecDefaults(&d.Spec.Template)
}

// SetReplicaSetDefaults defaults a ReplicaSet: replicas 1 and the pod template's defaults.
func SetReplicaSetDefaults(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = int32Ptr(1)
	}
	SetPodTemplateSpecDefaults(&rs.Spec.Template)
}

// SetStatefulSetDefaults defaults a StatefulSet: replicas 1, podManagementPolicy OrderedReady,
// updateStrategy RollingUpdate with partition 0, revisionHistoryLimit 10, the claim retention policy
// Retain/Retain, claim templates' volumeMode Filesystem, and the pod template's defaults.
func SetStatefulSetDefaults(s *appsv1.StatefulSet) {
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = int32Ptr(1)
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = int32Ptr(0)
		}
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = int32Ptr(DefaultRevisionHistoryLimit)
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	p := s.Spec.PersistentVolumeClaimRetentionPolicy
	if p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	for i := range s.Spec.VolumeClaimTemplates {
		c := &s.Spec.VolumeClaimTemplates[i]
		if c.Spec.VolumeMode == nil {
			fs := corev1.PersistentVolumeFilesystem
			c.Spec.VolumeMode = &fs
		}
		if c.Status.Phase == "" {
			c.Status.Phase = corev1.ClaimPending
		}
	}
	SetPodTemplateSpecDefaults(&s.Spec.Template)
}

// SetDaemonSetDefaults defaults a DaemonSet: updateStrategy RollingUpdate with maxUnavailable 1 and
// maxSurge 0, revisionHistoryLimit 10, and the pod template's defaults.
func SetDaemonSetDefaults(ds *appsv1.DaemonSet) {
	if ds.Spec.UpdateStrategy.Type == "" {
		ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if ds.Spec.UpdateStrategy.RollingUpdate == nil {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		ru := ds.Spec.UpdateStrategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			ru.MaxUnavailable = &one
		}
		if ru.MaxSurge == nil {
			zero := intstr.FromInt32(0)
			ru.MaxSurge = &zero
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = int32Ptr(DefaultRevisionHistoryLimit)
	}
	SetPodTemplateSpecDefaults(&ds.Spec.Template)
}
