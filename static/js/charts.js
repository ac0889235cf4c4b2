/* Draws the plotly figures a page embeds as <script type="application/json" class="figure">. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});
  TE.drawCharts = function (root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("script.figure").forEach((node) => {
      const target = document.getElementById(node.dataset.target);
      if (!target || target.dataset.drawn) return;
      const fig = JSON.parse(node.textContent);
      window.Plotly.newPlot(target, fig.data, fig.layout, { displaylogo: false, responsive: true,
        modeBarButtonsToRemove: ["sendDataToCloud", "lasso2d", "select2d"] });
      target.dataset.drawn = "1";
    });
  };
})();
