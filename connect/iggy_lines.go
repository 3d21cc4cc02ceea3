package connect

// This file holds the lifecycle log lines the runtime writes in the words of Iggy's
// runtime, beside its own: operators' alerts and tools written for Iggy's runtime match
// on these texts ("initialized successfully", "restarted successfully", "Sink: NAME (KEY) -
// ...", "Closed sink connector"), so they are kept word for word. Ferry's own lines say
// the same with attributes; both are written. The table of every line and its upstream
// counterpart is in docs/iggy-compatibility.md, "Log lines, JSON logs and exit codes".

import "fmt"

// kindTitle is a kind as upstream's lines begin with it: "Sink" or "Source".
func kindTitle(kind string) string {
	if kind == KindSink {
		return "Sink"
	}
	return "Source"
}

// logNotStarted: the connector did not start, in upstream's form for a connector that
// failed before it ran ("Sink: NAME (KEY) - Failed to resolve plugin path: ...").
func (r *runner) logNotStarted(err error) {
	r.log.Error(fmt.Sprintf("%s: %s (%s) - %v", kindTitle(r.kind), r.name, r.key, err))
}

// logOpenFailed: the plugin's open (upstream's init) returned an error.
func (r *runner) logOpenFailed(err error) {
	if r.kind == KindSink {
		r.log.Error(fmt.Sprintf("Failed to initialize sink container with name: %s (%s). %v", r.name, r.key, err))
		return
	}
	r.log.Error(fmt.Sprintf("Source container with name: %s (%s) failed to initialize: %v", r.name, r.key, err))
}

// logInitialized: the instance id opened and runs.
func (r *runner) logInitialized(id uint32) {
	r.log.Info(fmt.Sprintf("%s container with name: %s (%s) initialized successfully with ID: %d.", kindTitle(r.kind), r.name, r.key, id))
}

// logClosing and logClosed frame the plugin's close of instance id.
func (r *runner) logClosing(id uint32) {
	r.log.Info(fmt.Sprintf("Closing %s connector with ID: %d for plugin: %s", r.kind, id, r.key))
}

func (r *runner) logClosed(id uint32) {
	r.log.Info(fmt.Sprintf("Closed %s connector with ID: %d for plugin: %s", r.kind, id, r.key))
}

// The lines of one sink instance's consumers (one per stream × topic, as upstream's
// consume tasks) and of a batch that stopped the sink.
func sinkConsumingLine(id uint32) string {
	return fmt.Sprintf("Started consuming messages for sink connector with ID: %d", id)
}

func sinkStoppedConsumingLine(id uint32) string {
	return fmt.Sprintf("Stopped consuming messages for sink connector with ID: %d", id)
}

func sinkConsumeFailedLine(id uint32, err error) string {
	return fmt.Sprintf("Failed to consume messages for sink connector with ID: %d: %v", id, err)
}

// The lines of one source instance's loop.
func sourceStartedLine(id uint32) string {
	return fmt.Sprintf("Source connector with ID: %d started.", id)
}

func sourceStoppedLine(id uint32) string {
	return fmt.Sprintf("Source connector with ID: %d stopped.", id)
}

// The supervisor's lines: a connector not started because its file disables it, and a
// restart (requested, or automatic after a failure) with its success.
func disabledLine(kind, name, key string) string {
	return fmt.Sprintf("%s: %s is disabled (%s)", kindTitle(kind), name, key)
}

func restartingLine(kind, key string) string {
	return fmt.Sprintf("Restarting %s connector: %s", kind, key)
}

func restartedLine(kind, key string) string {
	return fmt.Sprintf("%s connector: %s restarted successfully.", kindTitle(kind), key)
}
