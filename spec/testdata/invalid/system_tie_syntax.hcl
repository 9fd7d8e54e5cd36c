# Invalid: ties without a condition, with roles on a machine that runs once
# per pod, with all but no replicated machine, a bad mode, and a guard tied
# twice.
machine "p" {
  initial = state.a
  event "go" {}
  guard "ok" {}
  guard "fine" {}
  guard "good" {}
  state "a" {
    transition "go" {
      guard = guard.ok
      to    = state.b
    }
    transition "go" {
      guard = guard.fine
      to    = state.b
    }
    transition "go" {
      guard = guard.good
      to    = state.b
    }
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
tie "p" "ok" { doc = "no condition" }
tie "p" "fine" { roles = [role.init] }
tie "p" "good" {
  all  = [p.a]
  mode = "maybe"
}
tie "p" "good" { in = [p.b] }
