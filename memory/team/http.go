package team

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"prom.codes/memory-mcp/memory"
)

// Handler serves the push and pull endpoints of l. token is the token a
// request bore, checked already (the team server's bearer guard); a
// request without one is refused. redact (nil: none) takes the database's
// password out of an error before it is logged.
func Handler(l *Log, token func(*http.Request) (memory.Token, bool), log *slog.Logger, redact func(error) error) http.Handler {
	if redact == nil {
		redact = func(err error) error { return err }
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PushPath, func(w http.ResponseWriter, r *http.Request) {
		tok, ok := token(r)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// Each change is decoded on its own, so that a malformed one is
		// refused alone and the others go in.
		var req struct {
			Changes []json.RawMessage `json:"changes"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "the body is not a push: want {\"changes\": [...]}", http.StatusBadRequest)
			return
		}
		if len(req.Changes) > MaxPush {
			http.Error(w, "too many changes in one push: at most "+strconv.Itoa(MaxPush), http.StatusRequestEntityTooLarge)
			return
		}
		var good []Change
		var at []int
		out := PushResponse{Results: make([]Result, len(req.Changes))}
		for i, raw := range req.Changes {
			var c Change
			if err := json.Unmarshal(raw, &c); err != nil {
				var id struct {
					ID any `json:"id"`
				}
				json.Unmarshal(raw, &id)
				s, _ := id.ID.(string)
				if !idRE.MatchString(s) {
					s = ""
				}
				out.Results[i] = Result{ID: s, Status: Refused, Reason: "malformed: the change is not valid JSON of a change"}
				continue
			}
			good, at = append(good, c), append(at, i)
		}
		rs, err := l.Push(r.Context(), tok, good)
		if err != nil {
			log.Warn("sync push", "err", redact(err))
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the change log is unavailable: nothing was stored; push again", http.StatusServiceUnavailable)
			return
		}
		for j, res := range rs {
			out.Results[at[j]] = res
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET "+PullPath, func(w http.ResponseWriter, r *http.Request) {
		tok, ok := token(r)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		after, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if q.Get("after") == "" {
			after, err = 0, nil
		}
		if err != nil || after < 0 {
			http.Error(w, "after must be a seq: a whole number, 0 or more", http.StatusBadRequest)
			return
		}
		limit := DefaultPull
		if v := q.Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPull {
				http.Error(w, "limit must be between 1 and "+strconv.Itoa(MaxPull), http.StatusBadRequest)
				return
			}
		}
		afterID := q.Get("after_id")
		if afterID != "" && !idRE.MatchString(afterID) {
			http.Error(w, "after_id must be a change id", http.StatusBadRequest)
			return
		}
		resp, err := l.Pull(r.Context(), tok, after, afterID, limit)
		if err != nil {
			if !errors.Is(err, r.Context().Err()) {
				log.Warn("sync pull", "err", redact(err))
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the change log is unavailable; pull again", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, resp)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
