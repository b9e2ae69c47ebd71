package agent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/sysray/sysray/internal/flight"
)

// Captures is what the HTTP API needs of the flight recorder.
type Captures interface {
	List() ([]flight.Entry, error)
	Open(name string) (*os.File, error)
	// Snapshot writes the last seconds of events now, for reason.
	Snapshot(reason string) (flight.Entry, error)
}

// FindingsJSON is the body of GET /api/findings.
type FindingsJSON struct {
	Findings []Finding `json:"findings"`
	At       time.Time `json:"at"`
}

// api adds the findings and captures endpoints to mux, each behind guard.
func (a *Agent) api(mux *http.ServeMux, guard func(http.Handler) http.Handler) {
	handle := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, guard(f)) }
	if a.Findings != nil {
		handle("GET /api/findings", func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			writeJSON(w, http.StatusOK, FindingsJSON{Findings: a.Findings.List(now), At: now})
		})
	}
	if a.Captures == nil {
		return
	}
	handle("GET /api/captures", func(w http.ResponseWriter, r *http.Request) {
		l, err := a.Captures.List()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		if l == nil {
			l = []flight.Entry{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"captures": l})
	})
	handle("GET /api/captures/{name}", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.Captures.Open(r.PathValue("name"))
		if errors.Is(err, flight.ErrNotFound) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("name")+`"`)
		io.Copy(w, f)
	})
	handle("POST /api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		e, err := a.Captures.Snapshot("api")
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, e)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
