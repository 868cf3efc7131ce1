#include "stages/translation/translation_stage.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <variant>

#include "common/error.h"

namespace earshot::stages::translation {

// ---------------------------------------------------------------- WorkerPool

// ---------------------------------------------------------------- Segmenter

struct TranslationService::Counters {
  std::atomic<long> draft_calls{0}, final_calls{0}, skipped_drafts{0};
  std::atomic<long> prompt_decoded{0}, prompt_reused{0}, proposed{0}, accepted{0}, generated{0}, stepped{0};
};

namespace {

// Punctuation that may end a sentence (Latin and CJK full-width forms).
bool ends_sentence(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == ' ' || t.back() == '"' || t.back() == '\'' || t.back() == ')')) t.pop_back();
  if (t.empty()) return false;
  const char c = t.back();
  if (c == '.' || c == '!' || c == '?' || c == ';') return true;
  for (const char* p : {"\xE3\x80\x82", "\xEF\xBC\x81", "\xEF\xBC\x9F", "\xEF\xBC\x9B", "\xE2\x80\xA6"})
    if (t.ends_with(p)) return true;
  return false;
}

std::string joined(const std::vector<Word>& words) {
  std::string s;
  for (const Word& w : words) s += w.text;
  return s;
}

}  // namespace

SegmentClose Segmenter::close() {
  SegmentClose c{segment_, start_, end_, committed_};
  ++segment_;
  start_ = -1;
  end_ = 0;
  committed_.clear();
  return c;
}

std::string Segmenter::tail() const {
  std::vector<Word> fresh;
  for (const Word& w : tail_)
    if (w.end > committed_until_ || committed_until_ <= 0) fresh.push_back(w);
  std::string t = joined(fresh);
  if (committed_.empty())
    while (!t.empty() && t.front() == ' ') t.erase(t.begin());
  return t;
}

std::vector<SegmentClose> Segmenter::on_event(const events::Event& event) {
  std::vector<SegmentClose> out;
  if (const auto* c = std::get_if<events::WordsCommitted>(&event)) {
    for (const Word& w : c->words) {
      if (!w.language.empty()) language_ = w.language;
      if (start_ < 0) {
        start_ = w.start;
        std::string text = w.text;
        while (!text.empty() && text.front() == ' ') text.erase(text.begin());
        committed_ = text;
      } else {
        committed_ += w.text;
      }
      end_ = std::max(end_, w.end);
      committed_until_ = std::max(committed_until_, w.end);
      const double length = end_ - start_;
      if (length >= options_.hard_max_seconds || (length >= options_.soft_max_seconds && ends_sentence(w.text)))
        out.push_back(close());
    }
  } else if (const auto* p = std::get_if<events::ProvisionalChanged>(&event)) {
    tail_ = p->words;
  } else if (const auto* pause = std::get_if<events::Pause>(&event)) {
    // Judged at the pause's end, when its length is known.
    if (!pause->ongoing && pause->end - pause->start >= options_.pause_seconds && start_ >= 0) out.push_back(close());
  } else if (std::holds_alternative<events::Finalized>(event) || std::holds_alternative<events::EndOfStream>(event)) {
    if (start_ >= 0) out.push_back(close());
  } else if (const auto* l = std::get_if<events::LanguageDetected>(&event)) {
    language_ = l->language;
  }
  return out;
}

// ---------------------------------------------------------------- the stage

namespace {

struct Job {
  enum class Kind { kDraft, kFinal, kEnd } kind = Kind::kDraft;
  int segment = 0;
  double start = 0;
  double end = 0;
  std::string committed;  // draft: the committed source; final: the whole segment
  std::string tail;
  std::string language;  // the source language known when queued
};

// What the worker side owns: the engine and the job queue. Shared with the
// pool's closures so a job already handed to the pool finds it alive.
struct Worker {
  std::shared_ptr<const llm::LlmModel> model;
  std::shared_ptr<const CalibrationRegistry> registry;
  TranslationOptions options;
  std::string source_language;  // as configured ("auto" / "" = from the words)
  std::function<void(const std::string&)> warn;
  std::shared_ptr<TranslationService::Counters> counters;

  std::mutex mutex;
  std::condition_variable idle;
  std::deque<Job> queue;
  bool scheduled = false;  // a drain is queued in the pool or running
  bool executing = false;
  bool closed = false;
  Stage::Post post;

  std::unique_ptr<TranslationEngine> engine;  // worker thread only
  int engine_segment = 0;

  void ensure_engine(const std::string& language) {
    if (engine) return;
    EngineOptions eo;
    eo.source_language = language;
    eo.target_language = options.target_language;
    eo.commit = options.commit;
    eo.redraft_source_tokens = options.redraft_source_tokens;
    eo.max_new_tokens = options.max_new_tokens;
    eo.draft_tokens_per_source = options.draft_tokens_per_source;
    eo.draft_token_slack = options.draft_token_slack;
    eo.verify_drafts = options.verify_drafts;
    eo.context_tokens = options.context_tokens;
    eo.threads = options.threads;
    CalibrationRegistry::Lookup found = registry->find(model->id(), language, options.target_language);
    if (found.entry) {
      eo.heads = found.entry->heads;
    } else if (warn) {
      warn("translation: simultaneous mode off (" + found.reason +
           "); each segment is translated when it closes. Add an entry with --translation-calibration FILE.");
    }
    try {
      engine = std::make_unique<TranslationEngine>(*model, eo);
    } catch (const Error& e) {
      // A calibration that does not fit this model (heads out of range): warned
      // once, then whole segments only, rather than failing every job.
      if (eo.heads.empty()) throw;
      if (warn) warn(std::string("translation: simultaneous mode off (") + e.what() + ")");
      eo.heads.clear();
      engine = std::make_unique<TranslationEngine>(*model, eo);
    }
  }

  // Runs one job; returns the events it produced. `early` (optional) takes the
  // events that may go out before the job's model call ends.
  using Early = std::function<void(std::vector<events::Event>)>;
  std::vector<events::Event> run(const Job& job, const Early& early = {}) {
    std::vector<events::Event> out;
    if (job.kind == Job::Kind::kEnd) {
      out.push_back(events::EndOfStream{});
      return out;
    }
    // The engine's own count of model calls, attributed to the job's kind.
    const EngineStats before = engine ? engine->stats() : EngineStats{};
    run_model_job(job, out, early);
    if (engine) {
      const EngineStats after = engine->stats();
      (job.kind == Job::Kind::kDraft ? counters->draft_calls : counters->final_calls) +=
          after.model_calls - before.model_calls;
      counters->prompt_decoded += after.prompt_decoded - before.prompt_decoded;
      counters->prompt_reused += after.prompt_reused - before.prompt_reused;
      counters->proposed += after.proposed - before.proposed;
      counters->accepted += after.accepted - before.accepted;
      counters->generated += after.generated - before.generated;
      counters->stepped += after.stepped - before.stepped;
    }
    return out;
  }

  // A draft or final job; failures are warned about, never thrown.
  void run_model_job(const Job& job, std::vector<events::Event>& out, const Early& early) {
    try {
      ensure_engine(job.language);
      if (job.kind == Job::Kind::kDraft) {
        if (job.segment != engine_segment || !engine->simultaneous()) return;
        auto add = [&](const EngineUpdate& u, std::vector<events::Event>& to) {
          if (!u.committed.empty()) to.push_back(events::TranslationCommitted{job.segment, job.start, u.committed});
          if (u.draft_changed) to.push_back(events::TranslationDraftChanged{job.segment, job.start, u.draft});
        };
        std::function<void(const EngineUpdate&)> released;
        if (options.release_first && early)
          released = [&](const EngineUpdate& r) {
            std::vector<events::Event> now;
            add(r, now);
            early(std::move(now));
          };
        add(engine->update(job.committed, job.tail, released), out);
      } else {
        std::string text = engine->translate(job.committed);
        engine->reset();
        engine_segment = job.segment + 1;
        out.push_back(events::SegmentTranslated{job.segment, job.start, job.end, job.committed, std::move(text)});
      }
    } catch (const std::exception& e) {
      if (job.kind == Job::Kind::kFinal) {
        if (engine) engine->reset();
        engine_segment = job.segment + 1;
      }
      if (warn) warn(std::string("translation failed: ") + e.what());
    }
  }
};

class TranslationStage : public Stage {
 public:
  TranslationStage(std::shared_ptr<Worker> worker, std::shared_ptr<WorkerPool> pool,
                   std::function<void(const events::Event&)> observer)
      : worker_(std::move(worker)),
        pool_(std::move(pool)),
        observer_(std::move(observer)),
        segmenter_(worker_->options) {}

  ~TranslationStage() override {
    std::unique_lock lock(worker_->mutex);
    worker_->closed = true;
    worker_->queue.clear();
    worker_->idle.wait(lock, [&] { return !worker_->executing; });
  }

  void attach(Post post) override {
    std::lock_guard lock(worker_->mutex);
    worker_->post = std::move(post);
  }

  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (observer_) observer_(event);
    const bool end = std::holds_alternative<events::EndOfStream>(event);
    if (std::holds_alternative<events::StreamError>(event)) failed_ = true;
    // The end of the stream waits for the last final (after it, synchronously),
    // unless the stream failed.
    if (!end || failed_) emit(event);
    const bool is_draft_input = std::holds_alternative<events::WordsCommitted>(event) ||
                                std::holds_alternative<events::ProvisionalChanged>(event);
    std::vector<Job> jobs;
    for (SegmentClose& c : segmenter_.on_event(event))
      jobs.push_back({Job::Kind::kFinal, c.segment, c.start, c.end, std::move(c.source), "", language()});
    if (is_draft_input && !segmenter_.committed().empty())
      jobs.push_back({Job::Kind::kDraft, segmenter_.segment(), segmenter_.start(), 0, segmenter_.committed(),
                      segmenter_.tail(), language()});
    if (end && !failed_ && pool_) {
      Job finish;
      finish.kind = Job::Kind::kEnd;
      jobs.push_back(std::move(finish));
    }
    if (!pool_) {  // synchronous: in order, at once
      for (const Job& j : jobs)
        for (events::Event& e : worker_->run(j)) emit(std::move(e));
      if (end && !failed_) emit(event);
      return;
    }
    if (jobs.empty()) return;
    enqueue(std::move(jobs));
  }

 private:
  std::string language() const {
    const std::string& configured = worker_->source_language;
    if (!configured.empty() && configured != "auto") return configured;
    return segmenter_.language();
  }

  void enqueue(std::vector<Job> jobs) {
    bool schedule = false;
    {
      std::lock_guard lock(worker_->mutex);
      if (worker_->closed) return;
      for (Job& j : jobs) {
        // Behind: only the newest draft waits, and none of a segment whose
        // final is queued (the final replaces it before it would be seen);
        // finals and the end always wait.
        if (j.kind == Job::Kind::kDraft)
          worker_->counters->skipped_drafts += static_cast<long>(
              std::erase_if(worker_->queue, [](const Job& q) { return q.kind == Job::Kind::kDraft; }));
        if (j.kind == Job::Kind::kFinal)
          worker_->counters->skipped_drafts += static_cast<long>(std::erase_if(
              worker_->queue, [&](const Job& q) { return q.kind == Job::Kind::kDraft && q.segment <= j.segment; }));
        worker_->queue.push_back(std::move(j));
      }
      if (!worker_->scheduled) schedule = worker_->scheduled = true;
    }
    if (schedule) pool_->submit([w = worker_] { drain(*w); });
  }

  // On a pool thread: this stage's jobs until its queue is empty.
  static void drain(Worker& w) {
    std::unique_lock lock(w.mutex);
    while (!w.closed && !w.queue.empty()) {
      Job job = std::move(w.queue.front());
      w.queue.pop_front();
      w.executing = true;
      lock.unlock();
      std::vector<events::Event> out = w.run(job, [&w](std::vector<events::Event> early) {
        if (w.post) w.post(std::move(early));
      });
      if (!out.empty() && w.post) w.post(std::move(out));  // the destructor waits for executing to clear
      lock.lock();
      w.executing = false;
      w.idle.notify_all();
    }
    w.scheduled = false;
  }

  std::shared_ptr<Worker> worker_;
  std::shared_ptr<WorkerPool> pool_;  // null: synchronous
  std::function<void(const events::Event&)> observer_;
  Segmenter segmenter_;
  bool failed_ = false;
};

}  // namespace

// ---------------------------------------------------------------- service

TranslationService::TranslationService(std::shared_ptr<const llm::LlmModel> model, CalibrationRegistry registry,
                                       int workers, TranslationOptions defaults)
    : model_(std::move(model)),
      registry_(std::make_shared<const CalibrationRegistry>(std::move(registry))),
      pool_(std::make_shared<WorkerPool>(workers)),
      defaults_(std::move(defaults)),
      warn_([](const std::string& m) { std::fprintf(stderr, "earshot: %s\n", m.c_str()); }),
      counters_(std::make_shared<Counters>()) {
  if (!model_) throw Error(ErrorCode::kInternal, "TranslationService needs a model");
}

std::unique_ptr<Stage> TranslationService::make_stage(const std::string& source_language,
                                                      const std::string& target_language) const {
  TranslationOptions o = defaults_;
  o.target_language = target_language;
  return make_stage(source_language, o);
}

namespace {
std::shared_ptr<Worker> make_worker(std::shared_ptr<const llm::LlmModel> model,
                                    std::shared_ptr<const CalibrationRegistry> registry,
                                    const TranslationOptions& options, const std::string& source_language,
                                    std::function<void(const std::string&)> warn,
                                    std::shared_ptr<TranslationService::Counters> counters) {
  if (options.target_language.empty())
    throw Error(ErrorCode::kInvalidArgument, "a translation stage needs a target language");
  auto w = std::make_shared<Worker>();
  w->model = std::move(model);
  w->registry = std::move(registry);
  w->options = options;
  w->source_language = source_language;
  w->warn = std::move(warn);
  w->counters = std::move(counters);
  return w;
}
}  // namespace

std::unique_ptr<Stage> TranslationService::make_stage(const std::string& source_language,
                                                      const TranslationOptions& options) const {
  return std::make_unique<TranslationStage>(make_worker(model_, registry_, options, source_language, warn_, counters_),
                                            pool_, observer_);
}

std::unique_ptr<Stage> TranslationService::make_synchronous_stage(const std::string& source_language,
                                                                  const TranslationOptions& options) const {
  return std::make_unique<TranslationStage>(make_worker(model_, registry_, options, source_language, warn_, counters_),
                                            nullptr, observer_);
}

void TranslationService::wait_idle() const { pool_->wait_idle(); }

TranslationCounts TranslationService::counts() const {
  const Counters& c = *counters_;
  TranslationCounts out;
  out.draft_calls = c.draft_calls.load();
  out.final_calls = c.final_calls.load();
  out.skipped_drafts = c.skipped_drafts.load();
  out.prompt_decoded = c.prompt_decoded.load();
  out.prompt_reused = c.prompt_reused.load();
  out.proposed = c.proposed.load();
  out.accepted = c.accepted.load();
  out.generated = c.generated.load();
  out.stepped = c.stepped.load();
  return out;
}

}  // namespace earshot::stages::translation
