# Invalid: unknown cri call.
machine "m" {
  initial = state.a
  event "go" {}
  event "back" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer", "StartContianer"] }
  duration "wait" {}
  state "a" {
    timeout "back" { after = duration.wait }
    transition "go" {
      guard   = guard.ok
      to      = state.b
      actions = [action.act]
    }
    transition "back" { to = state.b }
  }
  state "b" { final = true }
}
