package nodes

import (
	"time"

	"github.com/eru-extend/resources/internal/fastjson"
)

// decodeRegistrationFast decodes a registration in the form json.Marshal
// writes it, without encoding/json's reflection (a fifth of a many-node
// capacity query's CPU). It takes no observation or isolation ledger (a
// node that has them is decoded by encoding/json) and answers ok false
// for anything outside that form, which the caller then decodes with
// encoding/json: it only takes input that encoding/json reads the same
// way (FuzzDecodeRegistrationFast holds it to that). Times are read by
// time.Time's own UnmarshalJSON, as encoding/json reads them.
func decodeRegistrationFast(data []byte) (*Registration, bool) {
	d := fastjson.New(data)
	r := &Registration{}
	var seen [12]bool
	ok := d.Object(func(key []byte) bool {
		ok := false
		var (
			flag  *bool
			count *int64
			at    *time.Time
		)
		switch string(key) {
		case "node_id":
			if ok = fastjson.Once(&seen[0]); ok {
				r.NodeID, ok = d.Str()
			}
		case "admission":
			var s string
			if ok = fastjson.Once(&seen[1]); ok {
				s, ok = d.Str()
				r.Admission = Admission(s)
			}
		case "drain":
			ok, flag = fastjson.Once(&seen[2]), &r.Drain
		case "isolated":
			ok, flag = fastjson.Once(&seen[3]), &r.Isolated
		case "isolated_incarnation":
			ok, count = fastjson.Once(&seen[4]), &r.IsolatedIncarnation
		case "incarnation":
			ok, count = fastjson.Once(&seen[5]), &r.Incarnation
		case "boot_id":
			if ok = fastjson.Once(&seen[6]); ok {
				r.BootID, ok = d.Str()
			}
		case "registration_version":
			ok, count = fastjson.Once(&seen[7]), &r.Version
		case "created_at":
			ok, at = fastjson.Once(&seen[8]), &r.CreatedAt
		case "updated_at":
			ok, at = fastjson.Once(&seen[9]), &r.UpdatedAt
		case "session_ever":
			ok, flag = fastjson.Once(&seen[10]), &r.SessionEver
		case "last_seen":
			if ok = fastjson.Once(&seen[11]); ok {
				r.LastSeen = new(time.Time)
				at = r.LastSeen
			}
		}
		switch {
		case !ok:
		case flag != nil:
			*flag, ok = d.Bool()
		case count != nil:
			*count, ok = d.Int()
		case at != nil:
			var q []byte
			if q, ok = d.Quoted(); ok {
				ok = at.UnmarshalJSON(q) == nil
			}
		}
		return ok
	})
	return r, ok && d.Done()
}
