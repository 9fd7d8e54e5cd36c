# Invalid: an uncancellable call without a reason, and one given twice.
machine "m" {
  initial = state.a
  event "go" {}
  action "act" {
    cri = ["StartContainer", "ExecSync"]
    uncancellable = {
      StartContainer = " "
      "StartContainer" = "twice"
    }
  }
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" { final = true }
}
