# Invalid: a tie with roles on a machine that runs once per pod, all without
# a replicated machine, among without all or any, a flag set by an unknown
# action, a tie naming an unknown parameter value and an unknown flag, and a
# restored family naming an unknown state.
machine "p" {
  initial = state.a
  event "go" {}
  guard "ok" {}
  guard "fine" {}
  state "a" {
    transition "go" {
      guard = guard.ok
      to    = state.b
    }
    transition "go" {
      guard = guard.fine
      to    = state.b
    }
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
tie "p" "ok" { roles = [role.init] }
tie "p" "fine" {
  all   = [p.a]
  among = [role.regular]
}
parameter "policy" { values = ["a", "b"] }
flag "p" "bad" { set_by = p.nothing }
tie "p" "ok" {
  given = [policy.c]
  flags = [p.missing]
}
restored "back" { states = [p.c] }
