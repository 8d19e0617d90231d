//! crates.io `faktory` 0.13 (Faktory's Rust client, unchanged) against Worq's Faktory port.
//!
//! Its client pushes one `add` job (PUSH) and three more plus one `flaky` job in one PUSHB to
//! QUEUE (with one more job the server refuses); its worker (two processing connections and a coordinator beating as WID) runs them,
//! with any job already waiting there: `flaky` fails the first time. The worker runs until the
//! server tells it to terminate on a BEAT (the test does so through Worq's admin API once every
//! job is done). Prints one JSON line per event: pushed, ran, failed-once, stopped.
//!
//! Usage: FAKTORY_URL=tcp://:password@127.0.0.1:PORT QUEUE=name WID=id worq-faktory-rust-client

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use faktory::{Client, Job, Worker, WorkerId};
use serde_json::json;

fn emit(event: serde_json::Value) {
    println!("{event}");
}

#[tokio::main]
async fn main() {
    let url = std::env::var("FAKTORY_URL").expect("FAKTORY_URL");
    let queue = std::env::var("QUEUE").expect("QUEUE");
    let wid = std::env::var("WID").expect("WID");

    let mut client = Client::connect_to(&url).await.expect("client connects");
    let jobs: Vec<Job> = (0..4)
        .map(|i| {
            Job::builder("add")
                .args(vec![i, 10])
                .queue(queue.clone())
                .build()
        })
        .collect();
    let flaky = Job::builder("flaky")
        .args(vec![7])
        .queue(queue.clone())
        .retry(3)
        .build();
    let add_jids: Vec<String> = jobs.iter().map(|job| job.id().to_string()).collect();
    let flaky_jid = flaky.id().to_string();
    let mut jobs = jobs.into_iter();
    client.enqueue(jobs.next().unwrap()).await.expect("PUSH");
    let mut batch: Vec<Job> = jobs.collect();
    batch.push(flaky);
    // One job the server refuses (a queue name Faktory does not allow): the others still go in.
    let refused = Job::builder("add")
        .args(vec![9, 9])
        .queue("no such queue!")
        .build();
    let refused_jid = refused.id().to_string();
    batch.push(refused);
    let (enqueued, errors) = client.enqueue_many(batch).await.expect("PUSHB");
    emit(
        json!({"event": "pushed", "add": add_jids, "flaky": flaky_jid, "enqueued": enqueued, "refused": refused_jid, "errors": errors}),
    );
    drop(client);

    let failed_once = Arc::new(AtomicBool::new(false));
    let flaky_failed = Arc::clone(&failed_once);
    let mut worker = Worker::builder()
        .wid(WorkerId::new(wid))
        .workers(2)
        .register_fn("add", |job: Job| async move {
            emit(json!({"event": "ran", "jid": job.id().to_string(), "args": job.args()}));
            Ok::<(), io::Error>(())
        })
        .register_fn("flaky", move |job: Job| {
            let failed = Arc::clone(&flaky_failed);
            async move {
                if !failed.swap(true, Ordering::SeqCst) {
                    emit(json!({"event": "failed-once", "jid": job.id().to_string()}));
                    return Err(io::Error::other("flaky 7 failed once"));
                }
                emit(json!({"event": "ran", "jid": job.id().to_string(), "args": job.args()}));
                Ok(())
            }
        })
        .connect_to(&url)
        .await
        .expect("worker connects");
    match worker.run(&[queue.as_str()]).await {
        Ok(details) => emit(
            json!({"event": "stopped", "reason": format!("{:?}", details.reason), "running": details.workers_still_running}),
        ),
        Err(error) => {
            emit(json!({"event": "error", "message": error.to_string()}));
            std::process::exit(1);
        }
    }
}
