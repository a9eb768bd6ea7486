package validation

import (
	"encoding/json"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
)

// FuzzValidateService decodes arbitrary JSON into a Service, defaults and
// validates it, and validates it as an update (spec and status) of itself
// and of the minimal service: none of it may panic.
func FuzzValidateService(f *testing.F) {
	for _, s := range []*corev1.Service{minimalService()} {
		b, _ := json.Marshal(s)
		f.Add(b)
	}
	f.Add([]byte(`{"metadata":{"name":"s","namespace":"default"},"spec":{"type":"NodePort","ports":[{"port":-1,"nodePort":70000,"targetPort":"x"}]}}`))
	f.Add([]byte(`{"spec":{"type":"LoadBalancer","clusterIP":"None","clusterIPs":["None","10.0.0.1"],"ipFamilies":["IPv6","IPv4","IPv4"],"ipFamilyPolicy":"Bogus"}}`))
	f.Add([]byte(`{"spec":{"type":"ExternalName","externalName":"","sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}}}`))
	f.Add([]byte(`{"spec":{"ports":[{"port":80,"targetPort":0,"appProtocol":""},{"port":80}],"loadBalancerSourceRanges":["x"],"externalIPs":[""],"healthCheckNodePort":-5,"externalTrafficPolicy":"Local","internalTrafficPolicy":"x"}}`))
	f.Add([]byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"bad","ports":[{"port":-1}]}]},"conditions":[{}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s corev1.Service
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		raw := s.DeepCopy()
		defaults.SetServiceDefaults(&s)
		_ = ValidateService(&s)
		_ = ValidateService(raw)
		_ = ValidateServiceUpdate(s.DeepCopy(), &s)
		_ = ValidateServiceUpdate(&s, minimalService())
		_ = ValidateServiceUpdate(minimalService(), &s)
		_ = ValidateServiceStatusUpdate(s.DeepCopy(), &s)
		_ = ValidateServiceStatusUpdate(&s, minimalService())
	})
}

// FuzzValidateJob decodes arbitrary JSON into a Job, defaults it, generates
// its selector and validates it, then validates it as an update (spec and
// status) of itself and of the minimal job: none of it may panic.
func FuzzValidateJob(f *testing.F) {
	for _, j := range []*batchv1.Job{minimalJob()} {
		b, _ := json.Marshal(j)
		f.Add(b)
	}
	f.Add([]byte(`{"metadata":{"name":"j","namespace":"default"},"spec":{"parallelism":-1,"completions":-2,"backoffLimit":-3,"activeDeadlineSeconds":0,"ttlSecondsAfterFinished":-1,"template":{"spec":{"containers":[]}}}}`))
	f.Add([]byte(`{"spec":{"manualSelector":true,"selector":{"matchExpressions":[{"key":"","operator":"Bogus","values":[]}]},"completionMode":"Indexed","backoffLimitPerIndex":-1,"maxFailedIndexes":5}}`))
	f.Add([]byte(`{"spec":{"podFailurePolicy":{"rules":[{"action":"Bogus","onExitCodes":{"operator":"In","values":[0,0]},"onPodConditions":[{}]}]},"successPolicy":{"rules":[{"succeededIndexes":"x-","succeededCount":-1}]},"podReplacementPolicy":"Nope"}}`))
	f.Add([]byte(`{"spec":{"template":{"metadata":{"labels":{"-bad-":"-"}},"spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"i"}]}}},"status":{"active":-1,"succeeded":-1,"failed":-1,"ready":-1,"completedIndexes":"x","uncountedTerminatedPods":{"succeeded":["a","a"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var j batchv1.Job
		if err := json.Unmarshal(data, &j); err != nil {
			return
		}
		raw := j.DeepCopy()
		defaults.SetJobDefaults(&j)
		defaults.SetJobSelector(&j)
		_ = ValidateJob(&j)
		_ = ValidateJob(raw)
		_ = ValidateJobUpdate(j.DeepCopy(), &j)
		_ = ValidateJobUpdate(&j, minimalJob())
		_ = ValidateJobUpdate(minimalJob(), &j)
		_ = ValidateJobStatusUpdate(j.DeepCopy(), &j)
		_ = ValidateJobStatusUpdate(&j, minimalJob())
	})
}
