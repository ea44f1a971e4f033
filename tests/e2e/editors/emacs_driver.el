;;; emacs_driver.el --- Drive Emacs eglot (1.9+) against promptls, for tests/e2e/test_emacs.py  -*- lexical-binding: t -*-

;; Run as `emacs --batch -l emacs_driver.el' with the environment:
;;   PROMPTLS_CMD  JSON list: the server command
;;   CONV_FILE     a conversation to open, diagnose and hover
;;   FIX_FILE      a conversation with one fixable finding (edited in the buffer, not saved)
;;   OUT           where the JSON result goes
;;   PROMPTLS_INIT README's eglot snippet (modes, auto-mode-alist, eglot-server-programs,
;;                 eglot-ensure), loaded as it is but for the server command
;; Each part runs on its own, so a failing hover does not hide the quick fix; `errors' maps
;; a part to its error.  Every wait is bounded.  The pytest side makes the assertions.
;;
;; Batch-mode quirks (eglot 1.9): `eglot-ensure' connects from `post-command-hook' and
;; there are no commands in batch, so the hook is run by hand; idle timers never fire, so
;; eglot's debounced didChange is flushed with `eglot--signal-textDocument/didChange';
;; flymake is poked with `flymake-start' while waiting; `jsonrpc-shutdown' kills the server
;; right after `exit', so the clean exit is checked by sending shutdown/exit ourselves.

;;; Code:

(require 'eglot) ; Debian's site-start puts the elpa folders on the load path (not with -Q)
(require 'json)
(require 'cl-lib)

;; README's "Emacs (eglot)" snippet, loaded as it stands; then its server command is swapped
;; for the test's.
(load (getenv "PROMPTLS_INIT") nil t)
(defvar readme-cmd (cdr (assoc '(promptls-conv-mode promptls-prompt-mode) eglot-server-programs)))
(unless readme-cmd (error "README's snippet has no eglot-server-programs entry for promptls"))
(setcdr (assoc '(promptls-conv-mode promptls-prompt-mode) eglot-server-programs)
        (append (json-read-from-string (getenv "PROMPTLS_CMD")) nil))

(defvar out (make-hash-table :test 'equal))
(defvar errors (make-hash-table :test 'equal))
(defvar steps nil)
(defvar t0 (float-time))
(defvar timings (make-hash-table :test 'equal))
(defvar servers nil "Every server started, in order.")
(puthash "errors" errors out)
(puthash "readme_cmd" (vconcat readme-cmd) out)
(puthash "timings" timings out)

(defun step (name)
  (push name steps)
  (puthash name (round (* 1000 (- (float-time) t0))) timings))

(defun wait-until (what secs pred)
  "Pump process output until PRED holds, or fail after SECS seconds."
  (let ((deadline (+ (float-time) secs)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or (funcall pred) (error "Timed out after %s s waiting for %s" secs what))))

(defmacro part (name &rest body)
  (declare (indent 1))
  `(condition-case err
       (progn ,@body)
     (error (puthash ,name (format "%S" err) errors))))

(defun open-managed (file)
  "Visit FILE (README's hook runs `eglot-ensure') and wait for its server."
  (find-file file)
  (run-hooks 'post-command-hook) ; batch: no command ever ends, so connect by hand
  (wait-until "eglot to manage the buffer" 20
              (lambda () (and (bound-and-true-p eglot--managed-mode) (eglot-current-server))))
  (let ((server (eglot-current-server)))
    (cl-pushnew server servers)
    server))

(defun diagnostics ()
  "The buffer's flymake diagnostics: 0-based lines, code-point columns, LSP code."
  (vconcat
   (mapcar (lambda (d)
             (let* ((beg (flymake-diagnostic-beg d))
                    (end (flymake-diagnostic-end d))
                    (lsp (cdr (assoc 'eglot-lsp-diag (eglot--diag-data d)))))
               (list :code (plist-get lsp :code)
                     :type (symbol-name (flymake-diagnostic-type d))
                     :text (flymake-diagnostic-text d)
                     :line (1- (line-number-at-pos beg t))
                     :col (save-excursion (goto-char beg) (- beg (line-beginning-position)))
                     :end_line (1- (line-number-at-pos end t))
                     :end_col (save-excursion (goto-char end) (- end (line-beginning-position)))
                     :covered (buffer-substring-no-properties beg (min end (+ beg 200))))))
           (sort (flymake-diagnostics)
                 (lambda (a b)
                   (string< (format "%s" (plist-get (cdr (assoc 'eglot-lsp-diag (eglot--diag-data a))) :code))
                            (format "%s" (plist-get (cdr (assoc 'eglot-lsp-diag (eglot--diag-data b))) :code))))))))

(defun wait-for-diagnostics (what pred)
  (wait-until what 20 (lambda () (flymake-start) (funcall pred (flymake-diagnostics)))))

;; 1. An example conversation: diagnostics at the right places.
(defvar conv nil)
(part "diagnostics"
  (open-managed (getenv "CONV_FILE"))
  (setq conv (current-buffer))
  (step "initialized")
  (puthash "major_mode" (symbol-name major-mode) out)
  (wait-for-diagnostics "diagnostics" (lambda (ds) ds))
  (step "diagnostics")
  (puthash "diagnostics" (diagnostics) out))

;; 2. Hover on the document head: the raw answer, and the text eglot's eldoc shows.
(part "hover"
  (with-current-buffer conv
    (unless (eglot--server-capable :hoverProvider) (error "promptls offers no hover"))
    (goto-char (point-min))
    (let ((hover (jsonrpc-request (eglot--current-server-or-lose) :textDocument/hover
                                  (eglot--TextDocumentPositionParams) :timeout 10)))
      (puthash "hover" hover out)
      (puthash "hover_shown" (eglot--hover-info (plist-get hover :contents)) out))
    (step "hover")))

;; 3. A quick fix: code actions at the finding (eglot sends the server's own diagnostics),
;; apply the first quick fix's edit, and see the finding go.
(part "quick_fix"
  (open-managed (getenv "FIX_FILE"))
  (wait-for-diagnostics "diagnostics of the fix document" (lambda (ds) ds))
  (puthash "fix_diagnostics" (diagnostics) out)
  (unless (eglot--server-capable :codeActionProvider) (error "promptls offers no code actions"))
  (let* ((d (car (flymake-diagnostics)))
         (actions (eglot-code-actions (flymake-diagnostic-beg d) (flymake-diagnostic-end d)
                                      "quickfix"))
         (action (car actions)))
    (puthash "code_actions"
             (vconcat (mapcar (lambda (a) (list :title (plist-get a :title) :kind (plist-get a :kind)))
                              actions))
             out)
    (unless action (error "No quickfix at the diagnostic"))
    (step "code_actions")
    (eglot--apply-workspace-edit (plist-get action :edit))
    (puthash "fixed_text" (buffer-substring-no-properties (point-min) (point-max)) out)
    (eglot--signal-textDocument/didChange) ; batch: the idle timer that sends it never runs
    (wait-for-diagnostics "the finding to go" #'null)
    (step "fixed")))

;; 4. Shut down: shutdown + exit, then the server must exit by itself.
(part "exit"
  (puthash "server_exit"
           (vconcat
            (mapcar (lambda (server)
                      (let ((proc (jsonrpc--process server)))
                        (setf (eglot--shutdown-requested server) t)
                        (jsonrpc-request server :shutdown nil :timeout 10)
                        (jsonrpc-notify server :exit nil)
                        (wait-until "the server to exit" 10 (lambda () (not (process-live-p proc))))
                        (list (symbol-name (process-status proc)) (process-exit-status proc))))
                    (reverse servers)))
           out)
  (step "exited"))

(puthash "steps" (vconcat (reverse steps)) out)
(with-temp-file (getenv "OUT")
  (insert (json-encode out)))
(kill-emacs 0)

;;; emacs_driver.el ends here
