# Invalid: bad identifier.
machine "m" {
  initial = state.a
  event "go" {}
  event "Back-Off" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer"] }
  duration "wait" {}
  state "a" {
    timeout "Back-Off" { after = duration.wait }
    transition "go" {
      guard   = guard.ok
      to      = state.b
      actions = [action.act]
    }
    transition "Back-Off" { to = state.b }
  }
  state "b" { final = true }
}
