// ipywidgets' views typeset their labels with MathJax 2's API,
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); this site serves MathJax 3. Loaded with
// "defer" right after MathJax, before the widget manager renders the saved widgets (on "load").
(() => {
  const mj = window.MathJax;
  if (!mj || mj.Hub) return;
  const typeset = (el) => {
    const run = () => mj.typesetPromise([el]).catch(() => {});
    if (mj.typesetPromise) run();
    else if (mj.startup && mj.startup.promise) mj.startup.promise.then(run);
  };
  mj.Hub = { Queue: (cmd) => { if (Array.isArray(cmd) && cmd[2]) typeset(cmd[2]); } };
})();
