//! A GPU taint or untaint, written once and waited for until the cluster says so: the rules
//! read back (or gone), and for `NoExecute` the pods that used the GPU gone.

use super::{Run, Step, Stop, secs};
use crate::ops::target::Target;
use crate::ops::{TaintEffect, TaintPlan, count};

pub(crate) async fn taint_op<T: Target>(t: &mut T, run: &mut Run<'_>, p: &TaintPlan) -> Step<String> {
    let what = format!("GPU {} of {}", p.gpu, p.node);
    let Some(effect) = p.effect else {
        for r in &p.rules {
            let existed = t.delete_taint_rule(run, &r.name).await?;
            let line = if existed {
                format!("deleted DeviceTaintRule {}", r.name)
            } else {
                format!("{} was gone already", r.name)
            };
            run.step(line).await?;
        }
        wait_rules(t, run, p, false).await?;
        return Ok(format!("{what} untainted: the API server has none of fabrik's rules on it"));
    };
    for r in &p.rules {
        let created = t.create_taint_rule(run, p, r).await?;
        let line = if created {
            format!("created DeviceTaintRule {} on {}", r.name, r.device)
        } else {
            format!("DeviceTaintRule {} was there already, as planned", r.name)
        };
        run.step(line).await?;
    }
    wait_rules(t, run, p, true).await?;
    run.step(format!("the API server has {}", count(p.rules.len(), "rule"))).await?;
    let taint = format!("{}={}:{}", crate::ops::taint::TAINT_KEY, p.value, effect.as_str());
    if effect == TaintEffect::NoSchedule {
        return Ok(format!("{what} tainted {taint}: no new claim gets it"));
    }
    // NoExecute: the device taint eviction controller deletes the pods using the GPU.
    let pool = p.rules.first().map(|r| r.pool.clone()).unwrap_or_default();
    let devices: Vec<String> = p.rules.iter().map(|r| r.device.clone()).collect();
    let started = t.clock_ms();
    let mut missed = 0u32;
    loop {
        match t.device_pods(run, &pool, &devices).await? {
            Ok(pods) if pods.is_empty() => break,
            Ok(pods) => {
                if t.clock_ms() > run.deadline_ms {
                    return Err(Stop::Failed(format!(
                        "{} still use {what} after {}: {}; the taint stays (untaint to take it back)",
                        count(pods.len(), "pod"),
                        secs(std::time::Duration::from_millis(t.clock_ms() - started)),
                        pods.join(", ")
                    )));
                }
                run.blocked(format!(
                    "waiting for the device taint eviction controller to delete {}: {}",
                    count(pods.len(), "pod"),
                    pods.join(", ")
                ))
                .await?;
            }
            Err(f) if f.transient && t.clock_ms() <= run.deadline_ms => {
                missed += 1;
                run.log(format!("could not look at the pods using {what} ({}); looking again", f.why)).await?;
            }
            Err(f) => return Err(Stop::Failed(f.message)),
        }
        let poll = run.opts.poll;
        run.sleep(t, poll).await?;
    }
    let looks = if missed > 0 { format!(" ({missed} missed looks)") } else { String::new() };
    run.step(format!("no pod uses {what} any more{looks}")).await?;
    Ok(format!("{what} tainted {taint}: the pods that used it are gone"))
}

/// Waits until every rule of the plan is there (`present`) or gone.
async fn wait_rules<T: Target>(t: &mut T, run: &mut Run<'_>, p: &TaintPlan, present: bool) -> Step<()> {
    for r in &p.rules {
        loop {
            match t.taint_rule_exists(run, &r.name).await? {
                Ok(there) if there == present => break,
                Ok(_) if t.clock_ms() > run.deadline_ms => {
                    return Err(Stop::Failed(format!(
                        "DeviceTaintRule {} is {} on the API server after the write",
                        r.name,
                        if present { "not" } else { "still" }
                    )));
                }
                Ok(_) => {
                    run.blocked(format!(
                        "waiting for the API server to {} {}",
                        if present { "show" } else { "drop" },
                        r.name
                    ))
                    .await?
                }
                Err(f) if f.transient && t.clock_ms() <= run.deadline_ms => {}
                Err(f) => return Err(Stop::Failed(f.message)),
            }
            let poll = run.opts.poll;
            run.sleep(t, poll).await?;
        }
    }
    Ok(())
}
