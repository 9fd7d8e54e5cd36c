# Invalid: a tie with roles on a machine that runs once per pod, all without
# a replicated machine, among without all or any, and a guard tied twice.
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
tie "p" "ok" { in = [p.b] }
