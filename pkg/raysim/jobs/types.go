// Package jobs implements raysim's side of the Ray Jobs API: the job records
// (with Ray's JSON field names and status values), a manager that runs each
// job's entrypoint as a shell command on the head once the cluster has the
// resources it asks for, and an HTTP client for the dashboard's /api/jobs/.
package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Status is a job's state, with Ray's values.
type Status string

// The job states of the Ray Jobs API.
const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING"
	StatusStopped   Status = "STOPPED"
	StatusSucceeded Status = "SUCCEEDED"
	StatusFailed    Status = "FAILED"
)

// IsTerminal reports whether no further transition can happen from s.
func (s Status) IsTerminal() bool {
	return s == StatusStopped || s == StatusSucceeded || s == StatusFailed
}

// Job types reported in Details.Type.
const (
	TypeSubmission = "SUBMISSION"
	TypeDriver     = "DRIVER"
)

// Error types reported in Details.ErrorType.
const (
	ErrorTypeEntrypointFailed = "JOB_ENTRYPOINT_COMMAND_ERROR"
	ErrorTypeEntrypointStart  = "JOB_ENTRYPOINT_COMMAND_START_ERROR"
)

// DriverInfo describes the driver process of a job.
type DriverInfo struct {
	ID         string `json:"id"`
	NodeIPAddr string `json:"node_ip_address"`
	PID        string `json:"pid"`
}

// Details is one job as GET /api/jobs/{id} and GET /api/jobs/ return it.
// Optional fields are pointers so that "unset" is JSON null, as in Ray.
type Details struct {
	Type                   string            `json:"type"`
	JobID                  *string           `json:"job_id"`
	SubmissionID           *string           `json:"submission_id"`
	DriverInfo             *DriverInfo       `json:"driver_info"`
	Status                 Status            `json:"status"`
	Entrypoint             string            `json:"entrypoint"`
	Message                *string           `json:"message"`
	ErrorType              *string           `json:"error_type"`
	StartTime              *int64            `json:"start_time"`
	EndTime                *int64            `json:"end_time"`
	Metadata               map[string]string `json:"metadata"`
	RuntimeEnv             map[string]any    `json:"runtime_env"`
	DriverAgentHTTPAddress *string           `json:"driver_agent_http_address"`
	DriverNodeID           *string           `json:"driver_node_id"`
	DriverExitCode         *int              `json:"driver_exit_code"`
}

// SubmitRequest is the body of POST /api/jobs/.
type SubmitRequest struct {
	Entrypoint   string `json:"entrypoint"`
	SubmissionID string `json:"submission_id,omitempty"`
	// JobID is the deprecated spelling of SubmissionID.
	JobID string `json:"job_id,omitempty"`
	// RuntimeEnv and Metadata go out as null when nil and {} when empty, as Ray's CLI sends {}.
	RuntimeEnv          map[string]any     `json:"runtime_env"`
	Metadata            map[string]string  `json:"metadata"`
	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    *int64             `json:"entrypoint_memory,omitempty"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// SubmitResponse answers a submission. JobID repeats SubmissionID (deprecated field).
type SubmitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

// StopResponse answers POST /api/jobs/{id}/stop.
type StopResponse struct {
	Stopped bool `json:"stopped"`
}

// DeleteResponse answers DELETE /api/jobs/{id}.
type DeleteResponse struct {
	Deleted bool `json:"deleted"`
}

// LogsResponse answers GET /api/jobs/{id}/logs.
type LogsResponse struct {
	Logs string `json:"logs"`
}

// VersionResponse answers GET /api/version.
type VersionResponse struct {
	Version     string `json:"version"`
	RayVersion  string `json:"ray_version"`
	RayCommit   string `json:"ray_commit"`
	SessionName string `json:"session_name"`
}

// APIVersion is the Jobs API version raysim speaks (the "version" of /api/version), Ray 2.60's.
const APIVersion = "4"

// SpokenRayVersion is the Ray whose surfaces raysim speaks.
const SpokenRayVersion = "2.60.0"

// ReportedRayVersion is the "ray_version" of /api/version for raysim's own version v: the Ray it speaks
// with v as a PEP 440 local label ("2.60.0+raysim.9c7cb63.dirty"), which Ray's job client parses and
// compares with the least Ray it needs (a bare git description is no version to it).
func ReportedRayVersion(v string) string {
	label := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '.'
	}, v)
	label = strings.Trim(label, ".")
	for strings.Contains(label, "..") {
		label = strings.ReplaceAll(label, "..", ".")
	}
	if label == "" {
		return SpokenRayVersion + "+raysim"
	}
	return SpokenRayVersion + "+raysim." + label
}

// Job status messages, as Ray words them.
const (
	MessagePending          = "Job has not started yet."
	MessagePendingResources = "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available."
	// MessagePendingRuntimeEnv is added to a pending job's message when it has a runtime_env.
	MessagePendingRuntimeEnv = " It may be waiting for the runtime environment to be set up."
	MessageRunning           = "Job is currently running."
	MessageSucceeded         = "Job finished successfully."
	MessageStopped           = "Job was intentionally stopped."
)

// failedMessage is a failed entrypoint's status message, as Ray words it: the
// exit code, then the last logs.
func failedMessage(code int, lastLogs string) string {
	return fmt.Sprintf("Job entrypoint command failed with exit code %d, last available logs (truncated to 20,000 chars):\n%s", code, lastLogs)
}

// submitKeys are the fields Ray's JobSubmitRequest has; any other key is refused.
var submitKeys = map[string]bool{
	"entrypoint": true, "submission_id": true, "job_id": true, "runtime_env": true, "metadata": true,
	"entrypoint_num_cpus": true, "entrypoint_num_gpus": true, "entrypoint_memory": true,
	"entrypoint_resources": true, "entrypoint_label_selector": true,
}

// ParseSubmitRequest decodes and checks a submission body the way Ray's server
// checks it: a body that is no JSON object is a server error (500, as in Ray);
// a missing entrypoint or a key Ray's request has no field for is a 400; the
// entrypoint must be a string, metadata values strings, the entrypoint_*
// quantities numbers (entrypoint_memory an integer).
func ParseSubmitRequest(data []byte) (SubmitRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return SubmitRequest{}, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if _, ok := raw["entrypoint"]; !ok {
		return SubmitRequest{}, &BadRequestError{Msg: "missing required field: entrypoint"}
	}
	for k := range raw {
		if !submitKeys[k] {
			return SubmitRequest{}, &BadRequestError{Msg: fmt.Sprintf("unexpected field %q in the job submission", k)}
		}
	}
	var req SubmitRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return SubmitRequest{}, &BadRequestError{Msg: "invalid job submission: " + err.Error()}
	}
	if req.SubmissionID == "" && req.JobID != "" {
		req.SubmissionID = req.JobID
	}
	for name, v := range map[string]*float64{"entrypoint_num_cpus": req.EntrypointNumCPUs, "entrypoint_num_gpus": req.EntrypointNumGPUs} {
		if v != nil && *v < 0 {
			return SubmitRequest{}, &BadRequestError{Msg: name + " must not be negative"}
		}
	}
	return req, nil
}

// BadRequestError is a client error (HTTP 400).
type BadRequestError struct{ Msg string }

// Error returns the message.
func (e *BadRequestError) Error() string { return e.Msg }

// NotFoundError says no job has the given id (HTTP 404).
type NotFoundError struct{ ID string }

// Error says which job is missing.
func (e *NotFoundError) Error() string { return fmt.Sprintf("Job %s does not exist", e.ID) }

// DuplicateError says the submission_id is taken (HTTP 500, as in Ray). Its
// text carries Ray's phrase ("Please use a different submission_id"), which
// clients such as KubeRay match to learn that the job was already submitted.
type DuplicateError struct{ ID string }

// Error names the taken id with the phrase clients match.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("Job with submission_id %s already exists. Please use a different submission_id.", e.ID)
}

// NotTerminalError refuses to delete a job that has not finished.
type NotTerminalError struct {
	ID     string
	Status Status
}

// Error explains why the job cannot be deleted yet, in Ray's words.
func (e *NotTerminalError) Error() string {
	return fmt.Sprintf("Attempted to delete job '%s', but it is in a non-terminal state %s.", e.ID, e.Status)
}
